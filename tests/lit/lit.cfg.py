# lit configuration for dtc's golden and error tests (.onnxtxt inputs with RUN/CHECK lines).
import os
import resource
import lit.formats

config.name = "dtc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".onnxtxt", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.dtc_tools_dir), "tests", "lit-out")

config.environment["PATH"] = os.pathsep.join(
    [config.dtc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Sanitizer builds: "REQUIRES"/"UNSUPPORTED: asan" for tests that cannot run under AddressSanitizer
# (it reserves terabytes of address space, so an address-space limit (ulimit -v) stops it).
if config.dtc_sanitize.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asan")
# "tsan": a ThreadSanitizer build (DTC_TSAN), which like ASan cannot run under ulimit -v.
if getattr(config, "dtc_tsan", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("tsan")
# "cuda": dtc-run was built with the CUDA backend (DTC_ENABLE_CUDA); "gpu": this machine has an
# NVIDIA GPU (its driver's device node), so CUDA plans run instead of failing.
if getattr(config, "dtc_enable_cuda", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda")
if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
    config.available_features.add("gpu")
# "unlimited-stack": the hard stack limit is unlimited, so a test may run `ulimit -s unlimited`
# (glibc then gives new threads 2 MiB of stack while the main thread grows without bound).
if resource.getrlimit(resource.RLIMIT_STACK)[1] == resource.RLIM_INFINITY:
    config.available_features.add("unlimited-stack")
# Sanitizer builds: fail a test on any report, never on leaks inside protobuf's arenas.
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%dtc-compile", os.path.join(config.dtc_tools_dir, "dtc-compile")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%dtc-run", os.path.join(config.dtc_tools_dir, "dtc-run")))
config.substitutions.append(("%models", os.path.join(config.dtc_source_dir, "models")))
