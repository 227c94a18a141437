# runtime GPU tests (sources appended to DTC_GPU_TEST_SOURCES).
list(APPEND DTC_GPU_TEST_SOURCES
)
