// A rank process for the daemon tests: it reaches the job's daemon the way a real rank does
// (connect_engine, start on demand; job, directory and vgpud from the environment) and does one
// thing, reporting on stdout, one line per fact, flushed at once.
//
//   add <bytes>          add one flow; print "id <event id>"
//   work <rank> <n>      as rank <rank>: n flows, each followed by a task, every answer checked
//                        against the FakeEngine's rule; print "ok <n>" or "bad <i>"
//   hold <rank>          register <rank> (floor 0), add a 1 s task, print "waiting <id>", then
//                        wait_final on it: it is held back by this very rank, so this blocks
//                        until the process is killed
//   fork-and-die <rank>  register <rank> (floor 0), add a 1 s task, fork a child that sleeps,
//                        print "waiting <id> child <pid>", and exit without closing anything:
//                        the rank must count as gone although the child holds the fd's copy
//   as-nobody            become uid/gid 65534, then connect without starting a daemon; print
//                        "connected" or "refused: <reason>"
//   garbage              send junk on a raw connection; print "error <code>" for the daemon's
//                        answer and "eof" once it hangs up
// Failures to connect print "error: <reason>" and exit 1.
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fake_engine.h"
#include "job_paths.h"
#include "raw_client.h"
#include "simcore/remote_engine.h"
#include "socket_io.h"

namespace {

using simcore::EventId;
using simcore::kNoEvent;

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::unique_ptr<simcore::Engine> connect(int rank, bool start = true) {
  simcore::RemoteOptions o;
  o.rank = rank;
  o.start_daemon = start;
  o.connect_timeout_s = start ? 20 : 2;
  std::string err;
  auto e = simcore::connect_engine(o, &err);
  if (!e) say("error: " + err);
  return e;
}

int add(uint64_t bytes) {
  auto e = connect(-1);
  if (!e) return 1;
  simcore::FlowSpec f;
  f.src_gpu = 0;
  f.dst_gpu = 1;
  f.bytes = bytes;
  const EventId id = e->add_flow(f);
  say("id " + std::to_string(id));
  return id == kNoEvent ? 1 : 0;
}

int work(int rank, int n) {
  auto e = connect(rank);
  if (!e) return 1;
  e->register_rank(rank);
  for (int i = 0; i < n; ++i) {
    simcore::FlowSpec f;
    f.src_gpu = rank;
    f.dst_gpu = rank + 1;
    f.bytes = 1000ull * (i + 1);
    f.not_before = rank;
    const EventId id = e->add_flow(f);
    simcore::TaskSpec t;
    t.gpu = rank;
    t.duration = 1e-3;
    t.after = {id};
    const EventId task = e->add_task(t);
    const auto fi = e->query(id);
    const auto ti = e->query(task);
    const double finish = f.not_before + simcore::testing::FakeEngine::flow_duration(f.bytes);
    if (!fi || !ti || fi->start != f.not_before || fi->finish != finish ||
        ti->start != finish || ti->finish != finish + 1e-3) {
      say("bad " + std::to_string(i));
      return 1;
    }
  }
  e->unregister_rank(rank);
  say("ok " + std::to_string(n));
  return 0;
}

int hold(int rank) {
  auto e = connect(rank);
  if (!e) return 1;
  e->register_rank(rank);
  simcore::TaskSpec t;
  t.duration = 1;
  const EventId id = e->add_task(t);
  say("waiting " + std::to_string(id));
  const auto iv = e->wait_final(id);
  say(iv ? "final" : "not final");
  return 0;
}

int fork_and_die(int rank) {
  auto e = connect(rank);
  if (!e) return 1;
  e->register_rank(rank);
  simcore::TaskSpec t;
  t.duration = 1;
  const EventId id = e->add_task(t);
  const pid_t child = ::fork();
  if (child == 0) {
    ::sleep(60);
    ::_exit(0);
  }
  say("waiting " + std::to_string(id) + " child " + std::to_string(child));
  ::_exit(0);  // no destructors: the process just ends, as a crashed rank would
}

int as_nobody() {
  if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
    say("error: cannot become nobody");
    return 1;
  }
  simcore::RemoteOptions o;
  o.start_daemon = false;
  o.connect_timeout_s = 1;
  std::string err;
  auto e = simcore::connect_engine(o, &err);
  say(e ? "connected" : "refused: " + err);
  return 0;
}

int garbage() {
  simcore::daemon::JobPaths p;
  std::string err;
  if (!simcore::daemon::job_paths("", simcore::daemon::default_job_id(), &p, &err)) {
    say("error: " + err);
    return 1;
  }
  simcore::daemon::UniqueFd fd = simcore::daemon::connect_unix(p.socket, &err);
  if (!fd) {
    say("error: " + err);
    return 1;
  }
  const std::vector<uint8_t> junk = {0x10, 0, 0, 0, 'n', 'o', 'p', 'e', 1, 2, 3, 4, 5, 6, 7, 8,
                                     9, 10, 11, 12};
  simcore::testing::raw_send(fd.get(), junk);
  auto r = simcore::testing::raw_read(fd.get(), 1);
  for (const auto& f : r.frames)
    if (auto* e = simcore::testing::as_error(f)) say("error " + std::to_string(static_cast<int>(e->code)));
  if (simcore::testing::raw_sees_eof(fd.get())) say("eof");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "add" && argc == 3) return add(std::strtoull(argv[2], nullptr, 10));
  if (cmd == "work" && argc == 4) return work(std::atoi(argv[2]), std::atoi(argv[3]));
  if (cmd == "hold" && argc == 3) return hold(std::atoi(argv[2]));
  if (cmd == "fork-and-die" && argc == 3) return fork_and_die(std::atoi(argv[2]));
  if (cmd == "as-nobody") return as_nobody();
  if (cmd == "garbage") return garbage();
  std::fprintf(stderr, "usage: daemon_client_tool add|work|hold|as-nobody|garbage ...\n");
  return 2;
}
