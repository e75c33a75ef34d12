# pion_test(<name> SOURCES <files...> LIBS <libs...> [LABELS <labels...>] [TIMEOUT <s>])
# Builds one GoogleTest executable and registers it with CTest (one CTest entry per
# executable; the label picks the tier: unit, integration, crash, slow).
function(pion_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${name} ${T_SOURCES})
  # Test code is built for compile time, not run time: in the optimised configurations
  # the test's own files are compiled at -O1 with line tables only (half the compile
  # time of -O2 -g; the code under test keeps its configuration's flags, since it
  # comes from the libraries). Backtraces and gdb still have file:line.
  target_compile_options(${name} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-O1 -g1>)
  target_link_libraries(${name} PRIVATE ${T_LIBS} pion_flags GTest::gtest GTest::gtest_main
                                        Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
