# ServeJs.NpmInstall: installs the official `openai` npm package, pinned, into PREFIX
# (the build tree's js/ folder). Idempotent: a second run only checks the installed version
# and that node can load it. A failing npm is a failing test (no silent skip).
#
#   cmake -DNODE=... -DNPM=... -DPREFIX=... -DVERSION=... -P npm_install.cmake
foreach(v NODE NPM PREFIX VERSION)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "" OR "${${v}}" MATCHES "-NOTFOUND$")
    message(FATAL_ERROR "npm_install.cmake: ${v} is not set (${${v}}); node and npm are required")
  endif()
endforeach()

set(pkg_json "${PREFIX}/node_modules/openai/package.json")

# 0 in `out_ok` when the pinned version is installed and loads.
function(check_installed out_ok)
  set(${out_ok} FALSE PARENT_SCOPE)
  if(NOT EXISTS "${pkg_json}")
    return()
  endif()
  file(READ "${pkg_json}" content)
  string(JSON installed ERROR_VARIABLE err GET "${content}" version)
  if(err OR NOT installed STREQUAL VERSION)
    message(STATUS "openai@${installed} installed, want ${VERSION}")
    return()
  endif()
  execute_process(
    COMMAND "${NODE}" -e "const o = require('openai'); if (typeof o.OpenAI !== 'function') process.exit(3)"
    WORKING_DIRECTORY "${PREFIX}"
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err_out TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(STATUS "openai@${installed} does not load (${rc}): ${err_out}")
    return()
  endif()
  set(${out_ok} TRUE PARENT_SCOPE)
endfunction()

check_installed(ok)
if(ok)
  message(STATUS "openai@${VERSION} already installed in ${PREFIX}")
  return()
endif()

file(MAKE_DIRECTORY "${PREFIX}")
message(STATUS "npm install openai@${VERSION} into ${PREFIX}")
execute_process(
  COMMAND "${NPM}" install --no-audit --no-fund --save-exact --prefix "${PREFIX}"
          "openai@${VERSION}"
  WORKING_DIRECTORY "${PREFIX}"
  RESULT_VARIABLE rc TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm install openai@${VERSION} failed: ${rc}")
endif()
check_installed(ok)
if(NOT ok)
  message(FATAL_ERROR "openai@${VERSION} is not usable after npm install")
endif()
message(STATUS "openai@${VERSION} installed")
