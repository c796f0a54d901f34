/*
 * Prints the layout of every public struct the Python package mirrors with
 * ctypes (python/hicache/_lib.py): one line "struct field offset" per
 * field and "struct . size" per struct. test_abi.py compares the mirrors
 * with it, so a field added to a header without its mirror fails the suite
 * instead of letting the library write past a Python-allocated struct.
 */
#include <stddef.h>
#include <stdio.h>

#include <hicache/hicache.h>

#define S(type) printf("%s . %zu\n", #type, sizeof(struct type))
#define F(type, field) printf("%s %s %zu\n", #type, #field, offsetof(struct type, field))

int main(void)
{
	S(hc_region);
	F(hc_region, addr);
	F(hc_region, len);
	S(hc_key);
	F(hc_key, bytes);
	S(hc_kv_geometry);
	F(hc_kv_geometry, layers);
	F(hc_kv_geometry, heads);
	F(hc_kv_geometry, head_dim);
	F(hc_kv_geometry, elem_bytes);
	F(hc_kv_geometry, page_size);
	F(hc_kv_geometry, pages);
	F(hc_kv_geometry, layout);
	F(hc_kv_geometry, mla);
	S(hc_mamba_geometry);
	F(hc_mamba_geometry, slots);
	F(hc_mamba_geometry, layers);
	F(hc_mamba_geometry, temporal_bytes);
	F(hc_mamba_geometry, nconv);
	F(hc_mamba_geometry, conv_bytes);
	S(hc_indexer_geometry);
	F(hc_indexer_geometry, pages);
	F(hc_indexer_geometry, page_size);
	F(hc_indexer_geometry, page_bytes);
	S(hc_anchor_geometry);
	F(hc_anchor_geometry, pages);
	F(hc_anchor_geometry, page_size);
	S(hc_segment);
	F(hc_segment, addr);
	F(hc_segment, len);
	F(hc_segment, component);
	F(hc_segment, index);
	S(hc_segment_buffer);
	F(hc_segment_buffer, base);
	F(hc_segment_buffer, len);
	F(hc_segment_buffer, page_stride);
	F(hc_segment_buffer, seg_len);
	F(hc_segment_buffer, component);
	F(hc_segment_buffer, index);
	S(hc_store_opts);
	F(hc_store_opts, struct_size);
	F(hc_store_opts, backend);
	F(hc_store_opts, config);
	F(hc_store_opts, model);
	F(hc_store_opts, tp_rank);
	F(hc_store_opts, tp_size);
	F(hc_store_opts, force_bounce);
	S(hc_pool_reg);
	F(hc_pool_reg, struct_size);
	F(hc_pool_reg, anchor);
	F(hc_pool_reg, sharing);
	F(hc_pool_reg, suffix);
	F(hc_pool_reg, force_bounce);
	F(hc_pool_reg, elem_type);
	S(hc_pool_transfer);
	F(hc_pool_transfer, pool);
	F(hc_pool_transfer, keys);
	F(hc_pool_transfer, n);
	F(hc_pool_transfer, pages);
	F(hc_pool_transfer, policy);
	F(hc_pool_transfer, results);
	F(hc_pool_transfer, names);
	S(hc_exists_query);
	F(hc_exists_query, struct_size);
	F(hc_exists_query, keys);
	F(hc_exists_query, names);
	F(hc_exists_query, n);
	F(hc_exists_query, transfers);
	F(hc_exists_query, nt);
	F(hc_exists_query, kv_hit_pages);
	F(hc_exists_query, pool_hits);
	F(hc_exists_query, endpoints);
	F(hc_exists_query, endpoints_max);
	F(hc_exists_query, nendpoints);
	S(hc_store_stats);
	F(hc_store_stats, pages_written);
	F(hc_store_stats, bytes_written);
	F(hc_store_stats, pages_read);
	F(hc_store_stats, bytes_read);
	F(hc_store_stats, pages_existing);
	F(hc_store_stats, hits);
	F(hc_store_stats, misses);
	F(hc_store_stats, corrupt);
	F(hc_store_stats, failures);
	F(hc_store_stats, set_batches);
	F(hc_store_stats, get_batches);
	F(hc_store_stats, exists_batches);
	F(hc_store_stats, set_latency_us);
	F(hc_store_stats, get_latency_us);
	F(hc_store_stats, exists_latency_us);
	F(hc_store_stats, set_lookups);
	F(hc_store_stats, bounce_bytes);
	F(hc_store_stats, other_geometry);
	S(hc_store_pool_info);
	F(hc_store_pool_info, zero_copy);
	F(hc_store_pool_info, slot_bytes);
	F(hc_store_pool_info, page_bytes);
	F(hc_store_pool_info, alignment);
	F(hc_store_pool_info, objects);
	S(hc_fsck_report);
	F(hc_fsck_report, ok);
	F(hc_fsck_report, corrupt);
	F(hc_fsck_report, orphaned_temp);
	F(hc_fsck_report, foreign);
	F(hc_fsck_report, removed);
	F(hc_fsck_report, bytes);
	F(hc_fsck_report, misplaced);
	F(hc_fsck_report, gone);
	S(hc_fsck_opts);
	F(hc_fsck_opts, struct_size);
	F(hc_fsck_opts, repair);
	F(hc_fsck_opts, temp_age_s);
	S(hc_ls_report);
	F(hc_ls_report, pages);
	F(hc_ls_report, objects);
	F(hc_ls_report, bytes);
	F(hc_ls_report, oldest_ns);
	F(hc_ls_report, newest_ns);
	S(hc_store_cqe);
	F(hc_store_cqe, user_data);
	F(hc_store_cqe, result);
	return 0;
}
