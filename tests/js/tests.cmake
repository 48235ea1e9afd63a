# End-to-end tests of `hinge serve` from node (v20+): the official `openai` npm client and
# plain fetch. Included from the top-level CMakeLists.txt when the tests are built.
#
#   ServeJs.NpmInstall        fixture setup: npm install openai@<pinned> into ${CMAKE_BINARY_DIR}/js
#   ServeJs.OpenAiConformance the openai client against a live server (chat, completions,
#                             streaming, n, stop, seed, usage, prefix cache, errors, SIGTERM)
#   ServeJs.Overload          300 adversarial requests from 100 clients of 4 tenants against a
#                             tiny KV pool (per-tenant accounting checked)
#   ServeJs.Dashboard         the dashboard in headless chromium, screenshot in the build dir
#   ServeJs.Tls               the openai client and curl over https (openssl-made certificate)
#
# Run: ctest -R ServeJs --output-on-failure. Needs node and npm on PATH and network access to
# the npm registry for the first install; a missing node/npm or a failing npm fails the tests.

find_program(HINGE_NODE_EXECUTABLE node)
find_program(HINGE_NPM_EXECUTABLE npm)

# openai 7.x declares engines.node >= 22; 6.49.0 is the newest release that supports node 20.
set(HINGE_OPENAI_NPM_VERSION "6.49.0" CACHE STRING "openai npm package version for tests/js")
set(HINGE_JS_PREFIX "${CMAKE_BINARY_DIR}/js")
set(HINGE_JS_MODEL "${HINGE_SHARED_DIR}/models/stories260K.gguf")

set(_hinge_node "${HINGE_NODE_EXECUTABLE}")
if(NOT HINGE_NODE_EXECUTABLE)
  set(_hinge_node node)  # not found: the tests fail with "could not find executable"
endif()

add_test(NAME ServeJs.NpmInstall
  COMMAND ${CMAKE_COMMAND}
    "-DNODE=${HINGE_NODE_EXECUTABLE}" "-DNPM=${HINGE_NPM_EXECUTABLE}"
    "-DPREFIX=${HINGE_JS_PREFIX}" "-DVERSION=${HINGE_OPENAI_NPM_VERSION}"
    -P ${CMAKE_CURRENT_LIST_DIR}/npm_install.cmake)
set_tests_properties(ServeJs.NpmInstall PROPERTIES
  FIXTURES_SETUP serve_js TIMEOUT 360 LABELS "js")

set(_hinge_js_env
  "ASAN_OPTIONS=quarantine_size_mb=32:detect_leaks=1"
  "HINGE_BIN=$<TARGET_FILE:hinge>"
  "HINGE_MODEL=${HINGE_JS_MODEL}"
  "HINGE_JS_PREFIX=${HINGE_JS_PREFIX}"
  "HINGE_OPENAI_VERSION=${HINGE_OPENAI_NPM_VERSION}")

if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  list(APPEND _hinge_js_env "HINGE_SANITIZED=1")
endif()

add_test(NAME ServeJs.OpenAiConformance
  COMMAND ${_hinge_node} ${CMAKE_CURRENT_LIST_DIR}/openai_conformance.mjs)
set_tests_properties(ServeJs.OpenAiConformance PROPERTIES
  FIXTURES_REQUIRED serve_js TIMEOUT 90 LABELS "js"
  ENVIRONMENT "${_hinge_js_env}")

add_test(NAME ServeJs.Overload
  COMMAND ${_hinge_node} ${CMAKE_CURRENT_LIST_DIR}/overload.mjs)
# RUN_SERIAL: it loads the CPUs and measures latencies and RSS.
set_tests_properties(ServeJs.Overload PROPERTIES
  FIXTURES_REQUIRED serve_js TIMEOUT 200 RUN_SERIAL TRUE LABELS "js"
  ENVIRONMENT "${_hinge_js_env}")

# The dashboard in headless Chromium: live numbers in the DOM, a screenshot saved to
# ${CMAKE_BINARY_DIR}/dashboard.png.
add_test(NAME ServeJs.Dashboard
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/dashboard_test.sh ${CMAKE_BINARY_DIR} $<TARGET_FILE:hinge>
    ${HINGE_SHARED_DIR})
set_tests_properties(ServeJs.Dashboard PROPERTIES TIMEOUT 60 LABELS "js")

# HTTPS: the openai client and curl over TLS with a certificate the test makes with openssl.
add_test(NAME ServeJs.Tls
  COMMAND ${_hinge_node} ${CMAKE_CURRENT_LIST_DIR}/tls.mjs)
set_tests_properties(ServeJs.Tls PROPERTIES
  FIXTURES_REQUIRED serve_js TIMEOUT 90 LABELS "js"
  ENVIRONMENT "${_hinge_js_env}")

# Tool calls through the openai client's own parsing (tests/js/tool_calls.mjs).
add_test(NAME ServeJs.ToolCalls
  COMMAND ${_hinge_node} ${CMAKE_CURRENT_LIST_DIR}/tool_calls.mjs)
set_tests_properties(ServeJs.ToolCalls PROPERTIES
  FIXTURES_REQUIRED serve_js TIMEOUT 180 LABELS "js"
  ENVIRONMENT "${_hinge_js_env}")
