# Hostile clients against a real `hinge serve` on loopback (tests/serve/hostile_clients.py, run
# with Debian's /usr/bin/python3, standard library only). One ctest per case:
#   ServeHostile.trailers, .fd_exhaustion, .slowloris, .stalled_readers, .tokenize_flood, ...
# Included from the top-level CMakeLists.txt inside if(HINGE_BUILD_TESTS).
set(_hinge_hostile ${CMAKE_CURRENT_LIST_DIR}/hostile_clients.py)
set(_hinge_hostile_cases trailers fd_exhaustion fd_exhaustion_emfile connection_limit slowloris
    header_drip idle_keepalive stalled_readers tokenize_flood big_body protocol cors hosts_and_names
    sigterm_grace)
set(_hinge_hostile_env "ASAN_OPTIONS=quarantine_size_mb=32:detect_leaks=1")
if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  list(APPEND _hinge_hostile_env "HINGE_SANITIZED=1")  # time / CPU / RSS bounds scaled
endif()
foreach(_case IN LISTS _hinge_hostile_cases)
  add_test(NAME ServeHostile.${_case}
    COMMAND /usr/bin/python3 ${_hinge_hostile} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  # RUN_SERIAL: they measure latency, CPU and RSS of the server.
  set_tests_properties(ServeHostile.${_case} PROPERTIES TIMEOUT 180 RUN_SERIAL TRUE
    LABELS "serve" ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# `hinge serve --tenants` as a process (tests/serve/tenants.py): a bad tenants file refuses to
# start, SIGHUP reloads, the privacy marker never leaves the request, hinge keygen.
set(_hinge_tenants ${CMAKE_CURRENT_LIST_DIR}/tenants.py)
foreach(_case IN ITEMS keygen bad_file_refuses_start sighup_reload api_key_file admin_listener
    privacy_marker)
  add_test(NAME ServeTenants.${_case}
    COMMAND /usr/bin/python3 ${_hinge_tenants} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeTenants.${_case} PROPERTIES TIMEOUT 120 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# `hinge serve --chat-template-file` with the shared Qwen2.5 / Gemma 2 / Phi-3.5 templates
# (tests/serve/chat_templates.py).
set(_hinge_templates ${CMAKE_CURRENT_LIST_DIR}/chat_templates.py)
foreach(_case IN ITEMS templates_drive_chat bad_files_refuse_start)
  add_test(NAME ServeChatTemplates.${_case}
    COMMAND /usr/bin/python3 ${_hinge_templates} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeChatTemplates.${_case} PROPERTIES TIMEOUT 120 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# Bounded memory (tests/serve/bounded_memory.py): injected pressure readings drive the levels
# (RSS falls, 503 while critical, no request lost); --memory-budget holds RSS under an
# adversarial load and refuses a budget below the weights.
set(_hinge_bounded ${CMAKE_CURRENT_LIST_DIR}/bounded_memory.py)
foreach(_case IN ITEMS pressure_levels budget_holds budget_refuses shift_marks_responses)
  add_test(NAME ServeBoundedMemory.${_case}
    COMMAND /usr/bin/python3 ${_hinge_bounded} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  # RUN_SERIAL: they measure the server's RSS.
  set_tests_properties(ServeBoundedMemory.${_case} PROPERTIES TIMEOUT 180 RUN_SERIAL TRUE
    LABELS "serve" ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# The memory budget held while running through run, bench, serve and a cgroup limit, on a
# smollm-135m q8_0 the script synthesizes (tests/serve/budget_commands.py); chat's is
# ChatPty.budget_holds.
set(_hinge_budget ${CMAKE_CURRENT_LIST_DIR}/budget_commands.py)
foreach(_case IN ITEMS run_budget bench_budget serve_budget cgroup_budget)
  add_test(NAME ServeBudget.${_case}
    COMMAND /usr/bin/python3 ${_hinge_budget} --hinge $<TARGET_FILE:hinge> ${_case})
  # RUN_SERIAL: they measure RSS.
  set_tests_properties(ServeBudget.${_case} PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
    LABELS "serve" ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# Structured outputs (tests/serve/structured_outputs.py): JSON-schema requests validated by
# Debian's python3-jsonschema over 200 seeds on stories260K and a random synth model; json_object,
# guided_choice, GBNF; 400s naming the field.
set(_hinge_structured ${CMAKE_CURRENT_LIST_DIR}/structured_outputs.py)
foreach(_case IN ITEMS schema_200_seeds_trained schema_200_seeds_random_model
    json_object_choice_and_grammar bad_schemas_and_grammars_are_400 tool_choice_required_every_format)
  add_test(NAME ServeStructured.${_case}
    COMMAND /usr/bin/python3 ${_hinge_structured} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeStructured.${_case} PROPERTIES TIMEOUT 300 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# KV events (tests/serve/kv_events.py): a strict subscriber from vLLM's field lists (Debian's
# python3-zmq, python3-msgpack) decodes both formats, checks contiguous sequence numbers, a
# removal for every eviction, replay; bad flags refuse to start.
set(_hinge_kv_events ${CMAKE_CURRENT_LIST_DIR}/kv_events.py)
foreach(_case IN ITEMS positional map bad_flags)
  add_test(NAME ServeKvEvents.${_case}
    COMMAND /usr/bin/python3 ${_hinge_kv_events} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeKvEvents.${_case} PROPERTIES TIMEOUT 180 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# The encrypted disk tier (tests/serve/kv_tiers.py): hits after a reset and a restart, flipped
# bytes refused and removed, another secret reads nothing, tenants isolated through the disk,
# a marker in no file, purge deletes a tenant's files only; bad flags refuse to start.
set(_hinge_kv_tiers ${CMAKE_CURRENT_LIST_DIR}/kv_tiers.py)
foreach(_case IN ITEMS restart_and_tamper tenants_purge_and_marker bad_flags)
  add_test(NAME ServeKvTiers.${_case}
    COMMAND /usr/bin/python3 ${_hinge_kv_tiers} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeKvTiers.${_case} PROPERTIES TIMEOUT 180 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# The shared KV tier on Redis (tests/serve/kv_redis.py): a redis-server started on a loopback
# port, two replicas sharing it: B hits A's 1024-token prefix sooner than recomputing, tenants
# isolated and purged through Redis, TTL expiry, Redis killed or frozen fails no request.
set(_hinge_kv_redis ${CMAKE_CURRENT_LIST_DIR}/kv_redis.py)
foreach(_case IN ITEMS shared_prefix tenants ttl_expiry redis_down bad_flags)
  add_test(NAME ServeKvRedis.${_case}
    COMMAND /usr/bin/python3 ${_hinge_kv_redis} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeKvRedis.${_case} PROPERTIES TIMEOUT 180 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# hinge route (tests/serve/route.py): 3 replicas sharing a Redis tier, the router following
# their KV events: prefix routing computes within 1.2x of one replica and under half of
# round-robin; kill -9 of a replica mid-run ends every request cleanly; tenants isolated and
# purged through the router; fan-out, pass-through errors, 503 with no replica, bad flags.
set(_hinge_route ${CMAKE_CURRENT_LIST_DIR}/route.py)
foreach(_case IN ITEMS prefix_routing kill_replica tenants fan_out_and_errors)
  add_test(NAME ServeRoute.${_case}
    COMMAND /usr/bin/python3 ${_hinge_route} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeRoute.${_case} PROPERTIES TIMEOUT 300 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()

# Speculative decoding through the server (tests/serve/speculative.py): the same completions
# with and without --speculative ngram, greedy ones with a draft model, hinge:spec_* counted;
# bad flags refuse to start.
set(_hinge_spec ${CMAKE_CURRENT_LIST_DIR}/speculative.py)
foreach(_case IN ITEMS same_outputs draft_model bad_flags)
  add_test(NAME ServeSpeculative.${_case}
    COMMAND /usr/bin/python3 ${_hinge_spec} --hinge $<TARGET_FILE:hinge>
      --model ${HINGE_SHARED_DIR}/models/stories260K.gguf ${_case})
  set_tests_properties(ServeSpeculative.${_case} PROPERTIES TIMEOUT 120 LABELS "serve"
    ENVIRONMENT "${_hinge_hostile_env}")
endforeach()
