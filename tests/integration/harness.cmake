# berth_it_harness: the process / HTTP harness of the integration tests, also
# linked by the benchmarks in bench/ (which may be built without the tests).
if(NOT TARGET berth_it_harness)
  add_library(berth_it_harness STATIC ${CMAKE_CURRENT_LIST_DIR}/harness.cc
                                      ${CMAKE_CURRENT_LIST_DIR}/../support/netns.cc)
  target_include_directories(berth_it_harness PUBLIC ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(berth_it_harness PUBLIC nlohmann_json::nlohmann_json fmt::fmt
                                         PRIVATE PkgConfig::HTTPLIB Threads::Threads)
  berth_warnings(berth_it_harness)
endif()
