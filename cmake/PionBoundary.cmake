# Module boundaries the shared include root (src/) cannot enforce by itself.
#
# pion_check_boundary(TARGET <t> DIR <dir> FORBIDDEN_LIBS <libs...>
#                     FORBIDDEN_INCLUDES <module regex> [EXCLUDE <path regex>])
# fails the configure step when <t> links one of FORBIDDEN_LIBS directly, or a
# .h/.cc file under <dir> (except those matching an EXCLUDE regex) has
# `#include "<module>/..."` for a module matching FORBIDDEN_INCLUDES (e.g.
# "(store|server)"). Run as a script
# (cmake -DDIR=... -DFORBIDDEN_INCLUDES=... -DEXCLUDE=... -P PionBoundary.cmake)
# it does the include check alone, so CTest repeats it on the current tree.

function(_pion_check_includes dir modules excludes)
  file(GLOB_RECURSE _files "${dir}/*.h" "${dir}/*.cc")
  set(_bad "")
  foreach(f IN LISTS _files)
    set(_skip FALSE)
    foreach(rx IN LISTS excludes)
      if(f MATCHES "${rx}")
        set(_skip TRUE)
      endif()
    endforeach()
    if(_skip)
      continue()
    endif()
    file(STRINGS "${f}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS _lines)
      foreach(m IN LISTS modules)
        if(line MATCHES "#[ \t]*include[ \t]*[\"<]${m}/")
          list(APPEND _bad "${f}: ${line}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(_bad)
    list(JOIN _bad "\n  " _msg)
    message(FATAL_ERROR "module boundary: forbidden includes in ${dir}:\n  ${_msg}")
  endif()
endfunction()

function(pion_check_boundary)
  cmake_parse_arguments(B "" "TARGET;DIR" "FORBIDDEN_LIBS;FORBIDDEN_INCLUDES;EXCLUDE" ${ARGN})
  get_target_property(_libs ${B_TARGET} LINK_LIBRARIES)
  get_target_property(_ilibs ${B_TARGET} INTERFACE_LINK_LIBRARIES)
  foreach(l IN LISTS B_FORBIDDEN_LIBS)
    if(l IN_LIST _libs OR l IN_LIST _ilibs)
      message(FATAL_ERROR "module boundary: ${B_TARGET} must not link ${l}")
    endif()
  endforeach()
  _pion_check_includes("${B_DIR}" "${B_FORBIDDEN_INCLUDES}" "${B_EXCLUDE}")
  # Re-run the check when a file is added or changed.
  file(GLOB_RECURSE _files CONFIGURE_DEPENDS "${B_DIR}/*.h" "${B_DIR}/*.cc")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_files})
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DIR)
  _pion_check_includes("${DIR}" "${FORBIDDEN_INCLUDES}" "${EXCLUDE}")
endif()
