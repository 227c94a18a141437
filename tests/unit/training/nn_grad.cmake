# Test binary of the nn_grad family: dtc_unit_test(dtc_nn_grad_tests SOURCES unit/training/... LIBS dtc_gradcheck).
