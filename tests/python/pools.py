"""Stand-ins for SGLang's host pools, written from the contract
(docs/SGLANG.md): kv_buffer shapes per layout, page-aligned mmap memory as
SGLang's allocator gives, or torch.empty (not page-aligned)."""
import mmap

import torch

SHAPES = {
    "layer_first": lambda L, n, ps, H, D: (L, n * ps, H, D),
    "page_first": lambda L, n, ps, H, D: (n * ps, L, H, D),
    "page_first_direct": lambda L, n, ps, H, D: (n, L, ps, H, D),
    "page_head": lambda L, n, ps, H, D: (n, H, ps, L, D),
}


def buffer(shape, dtype, aligned):
    numel = 1
    for s in shape:
        numel *= s
    if not aligned:
        return torch.empty(shape, dtype=dtype), None
    isz = torch.empty(0, dtype=dtype).element_size()
    m = mmap.mmap(-1, max(numel * isz, 1))
    return torch.frombuffer(m, dtype=dtype, count=numel).view(shape), m


class KVPool:
    def __init__(self, layout, mla=False, L=2, H=2, D=16, ps=4, pages=16, dtype=torch.bfloat16, aligned=True):
        self.layout, self.page_size, self.page_num, self.size = layout, ps, pages, pages * ps
        self.layer_num, self.head_num, self.head_dim, self.dtype = L, (1 if mla else H), D, dtype
        shape = SHAPES[layout](L, pages, ps, self.head_num, D)
        if not mla:
            shape = (2,) + shape
        self.kv_buffer, self._mem = buffer(shape, dtype, aligned)
        self.mla = mla

    def get_data_page(self, index):
        kv, ps = self.kv_buffer, self.page_size
        if self.mla:
            kv = kv.unsqueeze(0)
        if self.layout == "page_first":
            t = kv[:, index:index + ps]
        elif self.layout == "layer_first":
            t = kv[:, :, index:index + ps]
        else:
            t = kv[:, index // ps]
        return t.flatten()

    def get_dummy_flat_data_page(self):
        return torch.zeros(self.get_data_page(0).numel(), dtype=self.dtype)

    def fill(self, seed=1):
        n = self.kv_buffer.numel()
        vals = (torch.arange(n, dtype=torch.int64) * 2654435761 + seed) % 65521
        self.kv_buffer.view(-1).copy_(vals.to(torch.float32).to(self.dtype))


class MambaPool:
    """Like MambaPoolHost: page_size 1, fp32 temporal (may be empty), bf16 convs."""

    def __init__(self, slots=16, Lm=2, temporal=(4, 8), convs=((8, 4),), aligned=True):
        self.page_size, self.size, self.layout = 1, slots, "page_first"
        if temporal:
            self.temporal_buffer, self._tm = buffer((slots, Lm, 1) + tuple(temporal), torch.float32, aligned)
        else:
            self.temporal_buffer, self._tm = torch.empty(0), None
        self.conv_buffer, self._cm = [], []
        for c in convs:
            b, m = buffer((slots, Lm, 1) + tuple(c), torch.bfloat16, aligned)
            self.conv_buffer.append(b)
            self._cm.append(m)

    def buffers(self):
        return ([self.temporal_buffer] if self.temporal_buffer.numel() else []) + self.conv_buffer


class SWAPool:
    """A side pool seen only through get_hybrid_pool_buffer and
    get_page_buffer_meta (the generic wrap): K and V buffers (pages, ps, H, D)."""

    def __init__(self, pages=16, ps=4, H=2, D=8, aligned=True):
        self.page_size, self.size, self.page_num = ps, pages * ps, pages
        self.k, self._km = buffer((pages, ps, H, D), torch.bfloat16, aligned)
        self.v, self._vm = buffer((pages, ps, H, D), torch.bfloat16, aligned)
        self.page_bytes = ps * H * D * 2

    def get_hybrid_pool_buffer(self):
        return [self.k, self.v]

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for i in indices[:: self.page_size].tolist():
            p = i // self.page_size
            ptrs += [self.k.data_ptr() + p * self.page_bytes, self.v.data_ptr() + p * self.page_bytes]
            sizes += [self.page_bytes, self.page_bytes]
        return ptrs, sizes
