# berth_warnings(target): the warning set for Berth's own code. Generated code
# (protobuf, gRPC) and third-party headers are not held to it.
function(berth_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
    -Wformat=2 -Wmisleading-indentation)
  # GCC 12 at -O2 reports impossible memcpy overlaps inside std::string's
  # operator+ ("x" + std::to_string(n)): GCC bug 105329, fixed in GCC 13.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(BERTH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
