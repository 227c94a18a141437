# Test binary of the activation_grad family: dtc_unit_test(dtc_activation_grad_tests SOURCES unit/training/... LIBS dtc_gradcheck).
