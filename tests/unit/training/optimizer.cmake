# Test binary of the optimizer family: dtc_unit_test(dtc_optimizer_tests SOURCES unit/training/... LIBS dtc_gradcheck).
