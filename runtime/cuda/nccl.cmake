# The NCCL device communicator (NcclCommunicator.h) in the CUDA runtime library.
target_sources(dtc_rt_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/NcclCommunicator.cpp)
target_link_libraries(dtc_rt_cuda PUBLIC dtc_nccl)
