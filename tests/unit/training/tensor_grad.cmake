# Test binary of the tensor_grad family: dtc_unit_test(dtc_tensor_grad_tests SOURCES unit/training/... LIBS dtc_gradcheck).
