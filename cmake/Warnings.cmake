# berth_warnings(target): the warning set for Berth's own code. Generated code
# (protobuf, gRPC) and third-party headers are not held to it.
function(berth_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
    -Wformat=2 -Wmisleading-indentation)
  if(BERTH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
