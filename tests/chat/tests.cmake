# `hinge chat` through a pseudo-terminal (tests/chat/chat_pty.py, Debian's /usr/bin/python3,
# standard library only): encrypted sessions saved and loaded, cache reuse across turns, the
# context policies, bad input. Included from the top-level CMakeLists.txt inside
# if(HINGE_BUILD_TESTS).
set(_hinge_chat ${CMAKE_CURRENT_LIST_DIR}/chat_pty.py)
foreach(_case IN ITEMS session_roundtrip template_reuse context_policies pressure_sheds budget_holds
    bad_input)
  add_test(NAME ChatPty.${_case}
    COMMAND /usr/bin/python3 ${_hinge_chat} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ChatPty.${_case} PROPERTIES TIMEOUT 180 LABELS "chat"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()
