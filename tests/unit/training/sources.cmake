# Gradient-rule and training-op test binaries, one per op family (each family's helper owns its
# own list: activation_grad.cmake, nn_grad.cmake, conv_grad.cmake, tensor_grad.cmake,
# optimizer.cmake).
foreach(family activation_grad nn_grad conv_grad tensor_grad optimizer function_ops_grad)
  include(${CMAKE_CURRENT_LIST_DIR}/${family}.cmake)
endforeach()
