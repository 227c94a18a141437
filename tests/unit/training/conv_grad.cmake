# Test binary of the conv_grad family: dtc_unit_test(dtc_conv_grad_tests SOURCES unit/training/... LIBS dtc_gradcheck).
