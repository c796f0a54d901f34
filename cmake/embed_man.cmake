# Embed the manual pages into the CLI, so that `hicache help CMD` and
# `hicache CMD --help` print the text man(1) shows: docs/man/*.1 are the
# one source. Run by the build (CMakeLists.txt) as
#   cmake -DMAN_DIR=<docs/man> -DOUT=<file.c> -P embed_man.cmake
# and writes OUT: one byte array per page and the table
# cli_man_pages[] (tools/hicache/commands.h), sorted by name, ending in
# {NULL, NULL}. Hex bytes, so that no page text needs C escaping.
if(NOT MAN_DIR OR NOT OUT)
  message(FATAL_ERROR "embed_man.cmake: MAN_DIR and OUT are required")
endif()
file(GLOB pages "${MAN_DIR}/*.1")
list(SORT pages)
set(body "/* Generated from docs/man by cmake/embed_man.cmake: do not edit. */\n")
string(APPEND body "#include \"commands.h\"\n\n")
set(table "")
set(i 0)
foreach(page ${pages})
  get_filename_component(name "${page}" NAME_WE)
  file(READ "${page}" hex HEX)
  # 16 bytes a line keeps the generated file readable in a debugger.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n\t" hex "${hex}")
  string(APPEND body "static const char page_${i}[] = {\n\t${hex}0\n};\n\n")
  string(APPEND table "\t{\"${name}\", page_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "const struct cli_man_page cli_man_pages[] = {\n${table}\t{NULL, NULL},\n};\n")
file(WRITE "${OUT}" "${body}")
