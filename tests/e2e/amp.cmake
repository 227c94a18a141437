# End-to-end mixed precision (--precision bf16): bf16 losses of the MLP, CNN and GPT within 2% of
# fp32 over 20 steps, dp=2 against single device in bf16 (the law within bf16 precision), fp16 and
# parameter-server refusals. See e2e/amp_train.py.
add_test(NAME e2e_amp
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/amp_train.py
          --build ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_amp PROPERTIES LABELS "e2e" TIMEOUT 300 RUN_SERIAL TRUE)
