# Writes OUT, a C file defining `const char NAME[]` with the bytes of IN (nul-terminated)
# and `const size_t NAME_size` (their count, the nul excluded); IN empty or absent: size 0.
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
set(hex "")
set(size 0)
if(IN AND EXISTS "${IN}")
  file(READ "${IN}" hex HEX)
  string(LENGTH "${hex}" len)
  math(EXPR size "${len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "((0x..,){24})" "\\1\n" hex "${hex}")
endif()
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake. */\n#include <stddef.h>\n"
  "const char ${NAME}[] = {\n${hex}0x00};\nconst size_t ${NAME}_size = ${size};\n")
