// Raw gRPC push rate (the peer of tools/bench/ps_bench.py's server throughput): a
// ParameterServer service on 127.0.0.1 whose Push only acknowledges, and N client threads each
// making --calls synchronous Push calls carrying --bytes of gradient, as dtc's workers do.
// Prints "<pushes/s> pushes/s <MB/s> MB/s".
#include "runtime/ps/ps.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

class AckOnly final : public dtc::ps::ParameterServer::Service {
  grpc::Status Push(grpc::ServerContext *, const dtc::ps::PushRequest *req,
                    dtc::ps::PushReply *reply) override {
    reply->set_version(req->step());
    return grpc::Status::OK;
  }
};

} // namespace

int main(int argc, char **argv) {
  int clients = 1, calls = 200;
  long bytes = 10632;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--clients"))
      clients = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--calls"))
      calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: dtc_grpc_bench [--clients N] [--calls K] [--bytes B]\n");
      return 2;
    }
  }
  if (clients < 1 || calls < 1 || bytes < 0) {
    std::fprintf(stderr, "error: --clients and --calls must be >= 1, --bytes >= 0\n");
    return 2;
  }
  AckOnly service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "error: cannot listen on 127.0.0.1\n");
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::atomic<int> failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetMaxSendMessageSize(INT_MAX);
      auto stub = dtc::ps::ParameterServer::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
      dtc::ps::PushRequest req;
      req.set_worker(c);
      req.add_gradients()->set_data(std::string(static_cast<size_t>(bytes), '\1'));
      for (int k = 0; k < calls; ++k) {
        req.set_step(k);
        dtc::ps::PushReply reply;
        grpc::ClientContext ctx;
        ctx.set_wait_for_ready(true);
        if (!stub->Push(&ctx, req, &reply).ok())
          ++failures;
      }
    });
  for (std::thread &t : threads)
    t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  server->Shutdown();
  if (failures) {
    std::fprintf(stderr, "error: %d calls failed\n", failures.load());
    return 1;
  }
  const double pushes = static_cast<double>(clients) * calls;
  std::printf("%.1f pushes/s %.2f MB/s\n", pushes / s, pushes * bytes / s / 1e6);
  return 0;
}
