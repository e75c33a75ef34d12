# module_boundary: pion.so carries no code of pion_server or pion_net (the
# process and the network layer), nor the Store (a module value holds one
# store::Namespace, module/ns_value.h); it is checked on the built file's
# symbols, so a transitive link is caught too. Run as: cmake -DSO=<pion.so>
# -DNM=<nm> -P this.
execute_process(COMMAND ${NM} -C ${SO} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${SO} failed")
endif()
string(REGEX MATCHALL "pion::(server::(Server|Worker|CommandService|ClientRegistry)|net::(Connection|EventLoop|RespParser|OutputQueue))[^\n]*" bad "${syms}")
if(bad)
  list(GET bad 0 first)
  message(FATAL_ERROR "pion.so contains server/net code: ${first}")
endif()
string(FIND "${syms}" "pion::store::Namespace::EncodeRows" has_store)
if(has_store EQUAL -1)
  message(FATAL_ERROR "pion.so has no store code: wrong file?")
endif()
# A module value is one namespace (store::Namespace), not a whole Store.
string(REGEX MATCH "pion::store::Store::[^\n]*" whole_store "${syms}")
if(whole_store)
  message(FATAL_ERROR "pion.so contains the Store: ${whole_store}")
endif()
message(STATUS "pion.so: no server or net code, no Store")
