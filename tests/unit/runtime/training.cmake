# Training-runtime test binaries (owned by the runtime/trainer work): data loading, learning-rate
# schedules, checkpoints and the training loop on a hand-made plan.
dtc_unit_test(dtc_training_runtime_tests
  SOURCES unit/runtime/TrainingTestUtil.cpp unit/runtime/DataLoaderTest.cpp
          unit/runtime/LrScheduleTest.cpp unit/runtime/CheckpointTest.cpp
          unit/runtime/TrainerTest.cpp unit/runtime/DeviceTest.cpp
  LIBS dtc_runtime dtc_test_util nlohmann_json::nlohmann_json)
# Parameter servers and central storage (runtime/ps): cluster parsing, shard placement and the
# server's rules on a compiled ps=2:2 plan.
dtc_unit_test(dtc_ps_tests
  SOURCES unit/runtime/ParameterServerTest.cpp
  LIBS dtc_ps dtc_driver dtc_lowering dtc_test_util)
