# End-to-end data parallelism (dtc-compile --strategy dp=N, dtc-run --nproc N; needs mpirun):
# the equivalence law against single-device training, uneven data and unusual graphs, and
# faults (a killed or stopped rank, different plans, usage errors). See e2e/dp_train.py.
add_test(NAME e2e_dp_equivalence
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/dp_train.py
          --build ${CMAKE_BINARY_DIR} --only equivalence)
set_tests_properties(e2e_dp_equivalence PROPERTIES LABELS "e2e" TIMEOUT 600)
add_test(NAME e2e_dp_data
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/dp_train.py
          --build ${CMAKE_BINARY_DIR} --only data,graphs)
set_tests_properties(e2e_dp_data PROPERTIES LABELS "e2e" TIMEOUT 300)
add_test(NAME e2e_dp_faults
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/dp_train.py
          --build ${CMAKE_BINARY_DIR} --only faults)
set_tests_properties(e2e_dp_faults PROPERTIES LABELS "e2e" TIMEOUT 300 RUN_SERIAL TRUE)
# End-to-end pipeline parallelism (--strategy pp=S[,dp=D], dtc-run --nproc S*D): the equivalence
# law against single-device training for every schedule and bundled model, gradients and export
# gathered from every stage, errors and a killed stage. See e2e/pp_train.py.
add_test(NAME e2e_pp
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/pp_train.py
          --build ${CMAKE_BINARY_DIR} --only equivalence,state,errors,faults)
set_tests_properties(e2e_pp PROPERTIES LABELS "e2e" TIMEOUT 600 RUN_SERIAL TRUE)
# Sharded checkpoints of pp=2, dp=2,pp=2 (4 ranks) and dp=2 jobs: one shard per program holding
# exactly its buffers, bit-identical resume (after a lost manifest and after a SIGKILL), refusal
# of a missing or corrupt shard naming it and the rank. See e2e/pp_train.py --only checkpoints.
add_test(NAME e2e_pp_checkpoints
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/pp_train.py
          --build ${CMAKE_BINARY_DIR} --only checkpoints)
set_tests_properties(e2e_pp_checkpoints PROPERTIES LABELS "e2e" TIMEOUT 300 RUN_SERIAL TRUE)
# End-to-end tensor parallelism (--strategy tp=T, with dp and pp meshes): the equivalence law
# against single-device training on the seed MLP, the digits MLP (tp=2, 4), the CNN, the GPT
# (heads split) and the tied GPT (vocabulary split); the collectives of the column/row pair;
# errors. See e2e/tp_train.py.
add_test(NAME e2e_tp
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/tp_train.py
          --build ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_tp PROPERTIES LABELS "e2e" TIMEOUT 600 RUN_SERIAL TRUE)
# End-to-end parameter servers (--strategy ps=S:W over gRPC, dtc-run --local-cluster or one
# process per task): --staleness 0 against single device and dp (the law), asynchronous
# accuracy, killed/restarted workers, a killed server, slow workers under the staleness bound,
# the job token and the plan fingerprint. See e2e/ps_train.py.
add_test(NAME e2e_ps
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/ps_train.py
          --build ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_ps PROPERTIES LABELS "e2e" TIMEOUT 600 RUN_SERIAL TRUE)
# ZeRO stages 1 and 2 (--strategy dp=N --zero 1|2): the equivalence law against single-device
# training (digits MLP and GPT, SGD with momentum and Adam, dp=2 and 4, padding, clipping,
# accumulation), the reduce-scatter/all-gather collectives on group dp, the optimizer-state and
# gradient bytes per rank, checkpoints with every rank's optimizer shard, and the refused
# combinations. See e2e/zero_train.py.
add_test(NAME e2e_zero
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/zero_train.py
          --build ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_zero PROPERTIES LABELS "e2e" TIMEOUT 900 RUN_SERIAL TRUE)
