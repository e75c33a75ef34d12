# pion_thread_safety: the clang thread-safety check (base/thread_annotations.h).
# Compiles every source of the libraries whose locks are annotated (pion_base,
# pion_persist, pion_store, pion_kvproto, pion_server with its commands) with -fsyntax-only
# -Wthread-safety -Werror=thread-safety: no objects, no link, so the check costs
# only clang's front end. Configured by the `thread-safety` preset
# (PION_THREAD_SAFETY=ON, clang), built by `make test-tsa`, part of
# `make test-sanitize`.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "PION_THREAD_SAFETY needs clang (-Wthread-safety): use the thread-safety preset")
endif()
set(_pion_tsa_sources)
foreach(_lib pion_base pion_persist pion_store pion_kvproto pion_server)
  get_target_property(_dir ${_lib} SOURCE_DIR)
  get_target_property(_srcs ${_lib} SOURCES)
  foreach(_src IN LISTS _srcs)
    cmake_path(ABSOLUTE_PATH _src BASE_DIRECTORY ${_dir} OUTPUT_VARIABLE _abs)
    list(APPEND _pion_tsa_sources ${_abs})
  endforeach()
endforeach()
add_library(pion_thread_safety OBJECT ${_pion_tsa_sources})
target_link_libraries(pion_thread_safety PRIVATE pion_server pion_persist pion_base pion_flags)
target_compile_options(pion_thread_safety PRIVATE -fsyntax-only -ferror-limit=0 -Wthread-safety
                                                  -Werror=thread-safety)
