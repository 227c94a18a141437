# Test binary of the conv_grad family: gradient rules of Conv, ConvTranspose, MaxPool,
# AveragePool, GlobalAveragePool, Resize and their ai.dtc kernels.
dtc_unit_test(dtc_conv_grad_tests SOURCES unit/training/ConvGradTest.cpp LIBS dtc_gradcheck)
