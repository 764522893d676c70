// vgpud's server and client library in one process: a Server over a FakeEngine on a thread,
// clients on other threads, over a real Unix socket (and TCP) in a private temp directory.
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <set>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "daemon_fixture.h"
#include "job_paths.h"
#include "raw_client.h"
#include "share_barrier.h"
#include "socket_io.h"

namespace simcore::testing {
namespace {

using daemon::ServerExit;
using daemon::ServerOptions;
using daemon::UniqueFd;

UniqueFd raw_connect(const InProcessDaemon& d) {
  std::string err;
  UniqueFd fd = daemon::connect_unix(d.socket(), &err);
  EXPECT_TRUE(fd) << err;
  return fd;
}

void raw_hello(int fd, const std::string& job) {
  ASSERT_TRUE(raw_send(fd, wire::Frame{1, wire::Hello{job, 0, ""}}));
  RawReplies r = raw_read(fd, 1);
  ASSERT_EQ(r.frames.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<wire::HelloReply>(r.frames[0].body));
}

TEST(Daemon, ThreadsShareOneConnectionAndGetTheirOwnAnswers) {
  InProcessDaemon d;
  auto remote = d.connect(0);
  ASSERT_TRUE(remote);
  constexpr int kThreads = 8, kEach = 150;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        FlowSpec f;
        f.src_gpu = t;
        f.dst_gpu = (t + 1) % 8;
        f.bytes = 1000ull * (t * kEach + i + 1);
        f.not_before = 0.5 * t;
        const EventId id = remote->add_flow(f);
        TaskSpec k;
        k.gpu = t;
        k.duration = 1e-3 * (i + 1);
        k.after = {id};
        const EventId task = remote->add_task(k);
        const auto fi = remote->query(id);
        const auto ti = remote->query(task);
        const double fdur = FakeEngine::flow_duration(f.bytes);
        if (id == kNoEvent || task == kNoEvent || !fi || !ti || fi->start != f.not_before ||
            fi->finish != f.not_before + fdur || ti->start != fi->finish ||
            ti->finish != fi->finish + k.duration || !remote->is_final(task))
          ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  // Unknown ids and bad dependencies come back as the engine's own error values.
  EXPECT_FALSE(remote->query(999999));
  EXPECT_FALSE(remote->is_final(999999));
  FlowSpec bad;
  bad.after = {999999};
  EXPECT_EQ(remote->add_flow(bad), kNoEvent);
  EXPECT_FALSE(remote->wait_final(999999));
}

TEST(Daemon, WaitFinalWaitsWithoutBlockingAnyoneElse) {
  InProcessDaemon d;
  auto a = d.connect(0);
  auto b = d.connect(1);
  a->register_rank(0);
  TaskSpec t;
  t.duration = 1.0;
  const EventId id = a->add_task(t);
  ASSERT_NE(id, kNoEvent);
  auto waiting = std::async(std::launch::async, [&] { return a->wait_final(id); });
  // While that wait is parked, the same connection and another one are served.
  for (int i = 0; i < 50; ++i) {
    EXPECT_NE(a->add_task(t), kNoEvent);
    EXPECT_TRUE(b->query(id));
  }
  EXPECT_FALSE(b->is_final(id));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  b->set_rank_floor(0, 2.0);  // anyone may move a floor; rank 0 now promises t >= 2
  const auto iv = waiting.get();
  ASSERT_TRUE(iv);
  EXPECT_EQ(iv->start, 0.0);
  EXPECT_EQ(iv->finish, 1.0);
}

TEST(Daemon, RanksWaitingOnEachOtherProgressThroughTheEnginesRankWaits) {
  // Rank 0 waits for rank 1's work and rank 1 for rank 0's: with plain wait_final both would
  // hold the floor at 0 forever; blocked in wait_final_for_rank, each promises the finish of
  // what it waits for. The daemon must run both engine waits at once for this to resolve.
  InProcessDaemon d;
  auto r0 = d.connect(0);
  auto r1 = d.connect(1);
  r0->register_rank(0);
  r1->register_rank(1);
  const EventId a = r0->add_task(TaskSpec{0, 0, 1.0, 0, {}, "a"});  // rank 0's, finishes at 1
  const EventId b = r1->add_task(TaskSpec{1, 0, 2.0, 0, {}, "b"});  // rank 1's, finishes at 2
  auto w0 = std::async(std::launch::async, [&] { return r0->wait_final_for_rank(b, 0); });
  EXPECT_EQ(w0.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  const auto got_a = r1->wait_final_for_rank(a, 1);  // rank 0 promises 2 while blocked
  ASSERT_TRUE(got_a);
  EXPECT_EQ(got_a->finish, 1.0);
  // Rank 1's floor is now 1 (< 2): b is not final until rank 1 promises more.
  EXPECT_EQ(w0.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  r1->set_rank_floor(1, 5);
  const auto got_b = w0.get();
  ASSERT_TRUE(got_b);
  EXPECT_EQ(got_b->finish, 2.0);
  EXPECT_FALSE(r0->wait_final_for_rank(999, 0));  // unknown id
}

TEST(Daemon, StatsComeFromTheEngine) {
  InProcessDaemon d;
  auto e = d.connect();
  // The fake keeps no counters: the defaults travel. (The real engine's are checked in
  // daemon_real_engine.)
  const Engine::Stats s = e->stats();
  EXPECT_EQ(s.events_submitted, 0u);
  EXPECT_EQ(s.floor, 0.0);
}

TEST(Daemon, ManyParkedWaitsFromManyClientsAllComeBack) {
  InProcessDaemon d;
  auto control = d.connect(99);
  control->register_rank(99);
  constexpr int kClients = 6, kWaits = 40;
  std::vector<std::unique_ptr<Engine>> clients;
  std::vector<std::vector<EventId>> ids(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(d.connect(c));
    for (int w = 0; w < kWaits; ++w) {
      TaskSpec t;
      t.duration = 1.0 + w;
      ids[c].push_back(clients[c]->add_task(t));
    }
  }
  std::vector<std::future<int>> done;
  for (int c = 0; c < kClients; ++c)
    done.push_back(std::async(std::launch::async, [&, c] {
      // One thread per wait on this client's single connection.
      std::vector<std::future<bool>> w;
      for (int i = 0; i < kWaits; ++i)
        w.push_back(std::async(std::launch::async, [&, c, i] {
          auto iv = clients[c]->wait_final(ids[c][i]);
          return iv && iv->finish == 1.0 + i;
        }));
      int ok = 0;
      for (auto& f : w) ok += f.get();
      return ok;
    }));
  control->set_rank_floor(99, 1e9);
  for (auto& f : done) EXPECT_EQ(f.get(), kWaits);
}

TEST(Daemon, OneConnectionCannotParkUnboundedWaits) {
  ServerOptions o;
  o.max_waits_per_client = 3;
  InProcessDaemon d(o);
  auto control = d.connect(0);
  control->register_rank(0);
  const EventId id = control->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  UniqueFd fd = raw_connect(d);
  raw_hello(fd.get(), d.job());
  // Requests of one connection are handled in order: three park, the fourth is refused.
  for (uint64_t r = 10; r < 14; ++r)
    ASSERT_TRUE(raw_send(fd.get(), wire::Frame{r, wire::WaitFinal{id}}));
  RawReplies first = raw_read(fd.get(), 1);
  ASSERT_EQ(first.frames.size(), 1u);
  EXPECT_EQ(first.frames[0].request_id, 13u);
  ASSERT_TRUE(as_error(first.frames[0]));
  EXPECT_EQ(as_error(first.frames[0])->code, wire::ErrorCode::kOverloaded);
  control->set_rank_floor(0, 2);
  RawReplies rest = raw_read(fd.get(), 3);
  ASSERT_EQ(rest.frames.size(), 3u);
  for (const auto& f : rest.frames) {
    const auto* iv = std::get_if<wire::IntervalReply>(&f.body);
    ASSERT_TRUE(iv && iv->interval);
    EXPECT_EQ(iv->interval->finish, 1.0);
  }
}

TEST(Daemon, ADisconnectedClientIsUnregisteredAndStopsHoldingTheFloor) {
  InProcessDaemon d;
  auto survivor = d.connect(1);
  survivor->register_rank(1);
  survivor->set_rank_floor(1, 100);
  auto leaver = d.connect(7);
  leaver->register_rank(7);
  leaver->register_rank(8);  // one process may speak for several ranks
  leaver->unregister_rank(8);
  leaver->register_rank(9);
  ASSERT_TRUE(eventually([&] { return d.engine().registered_ranks() == std::set<int>{1, 7, 9}; }));
  TaskSpec t;
  t.duration = 5;
  const EventId id = survivor->add_task(t);
  auto waiting = std::async(std::launch::async, [&] { return survivor->wait_final(id); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  leaver.reset();  // the process "dies": its socket closes
  const auto iv = waiting.get();
  ASSERT_TRUE(iv);
  EXPECT_EQ(iv->finish, 5.0);
  EXPECT_EQ(d.engine().registered_ranks(), std::set<int>{1});
}

TEST(Daemon, ADisconnectedClientsParkedWaitsAreDropped) {
  InProcessDaemon d;
  auto holder = d.connect(0);
  holder->register_rank(0);
  TaskSpec t;
  t.duration = 1;
  const EventId id = holder->add_task(t);
  {
    UniqueFd fd = raw_connect(d);
    raw_hello(fd.get(), d.job());
    for (uint64_t r = 10; r < 20; ++r) ASSERT_TRUE(raw_send(fd.get(), wire::Frame{r, wire::WaitFinal{id}}));
    ASSERT_TRUE(raw_send(fd.get(), wire::Frame{30, wire::Query{id}}));
    RawReplies r = raw_read(fd.get(), 1);  // the query is answered past the parked waits
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0].request_id, 30u);
  }
  // The waits of the closed connection must not trip the server when the event turns final.
  holder->set_rank_floor(0, 10);
  EXPECT_TRUE(holder->wait_final(id));
  EXPECT_TRUE(holder->query(id));
}

TEST(Daemon, GarbageGetsAnErrorAndADisconnectWhileOthersCarryOn) {
  InProcessDaemon d;
  auto good = d.connect(0);
  const EventId before = good->add_task(TaskSpec{});
  ASSERT_NE(before, kNoEvent);

  std::mt19937 rng(7);
  const std::vector<std::vector<uint8_t>> garbage = {
      {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'},
      {0xf0, 0xff, 0xff, 0x7f, 0, 0, 0, 0},  // a 2 GiB length: refused at once, not awaited
      {5, 0, 0, 0, 1, 2, 3, 4, 5},           // shorter than a header
  };
  for (const auto& g : garbage) {
    UniqueFd fd = raw_connect(d);
    ASSERT_TRUE(raw_send(fd.get(), g));
    RawReplies r = raw_read(fd.get(), 1);
    ASSERT_EQ(r.frames.size(), 1u);
    ASSERT_TRUE(as_error(r.frames[0]));
    EXPECT_EQ(as_error(r.frames[0])->code, wire::ErrorCode::kBadFrame);
    EXPECT_TRUE(raw_sees_eof(fd.get()));
    EXPECT_TRUE(good->query(before));
  }
  // Garbage after a proper Hello, with a registered rank: the rank is released too.
  {
    UniqueFd fd = raw_connect(d);
    raw_hello(fd.get(), d.job());
    ASSERT_TRUE(raw_send(fd.get(), wire::Frame{2, wire::RegisterRank{42}}));
    ASSERT_EQ(raw_read(fd.get(), 1).frames.size(), 1u);
    ASSERT_TRUE(eventually([&] { return d.engine().registered_ranks().count(42) == 1; }));
    std::vector<uint8_t> noise(5000);
    for (auto& x : noise) x = static_cast<uint8_t>(rng());
    noise[4] = 'X';  // not the magic
    ASSERT_TRUE(raw_send(fd.get(), noise));
    RawReplies r = raw_read(fd.get(), 1);
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_TRUE(as_error(r.frames[0]));
    EXPECT_TRUE(raw_sees_eof(fd.get()));
    EXPECT_TRUE(eventually([&] { return d.engine().registered_ranks().count(42) == 0; }));
  }
  // A well-formed frame of a reply type, sent as a request.
  {
    UniqueFd fd = raw_connect(d);
    raw_hello(fd.get(), d.job());
    ASSERT_TRUE(raw_send(fd.get(), wire::Frame{3, wire::Ack{}}));
    RawReplies r = raw_read(fd.get(), 1);
    ASSERT_EQ(r.frames.size(), 1u);
    ASSERT_TRUE(as_error(r.frames[0]));
    EXPECT_EQ(as_error(r.frames[0])->code, wire::ErrorCode::kUnexpected);
    EXPECT_TRUE(raw_sees_eof(fd.get()));
  }
  EXPECT_NE(good->add_task(TaskSpec{}), kNoEvent);
}

TEST(Daemon, HelloMustComeFirstAndNameThisJob) {
  InProcessDaemon d;
  {
    UniqueFd fd = raw_connect(d);
    ASSERT_TRUE(raw_send(fd.get(), wire::Frame{5, wire::Query{1}}));
    RawReplies r = raw_read(fd.get(), 1);
    ASSERT_EQ(r.frames.size(), 1u);
    ASSERT_TRUE(as_error(r.frames[0]));
    EXPECT_EQ(as_error(r.frames[0])->code, wire::ErrorCode::kNotGreeted);
    EXPECT_EQ(r.frames[0].request_id, 5u);
    EXPECT_TRUE(raw_sees_eof(fd.get()));
  }
  // A client of another job (e.g. a stale VGPU_JOB_ID) is told so by connect_engine.
  RemoteOptions o = d.options();
  o.job_id = "some-other-job";
  // Point it at this daemon's socket by giving the same file name stem through a symlink.
  daemon::JobPaths other;
  std::string err;
  ASSERT_TRUE(daemon::job_paths(d.dir(), o.job_id, &other, &err));
  ASSERT_EQ(::symlink(d.socket().c_str(), other.socket.c_str()), 0);
  auto e = connect_engine(o, &err);
  EXPECT_FALSE(e);
  EXPECT_NE(err.find("serves job"), std::string::npos) << err;
}

TEST(Daemon, AnotherProtocolVersionIsToldWhichOneTheDaemonSpeaks) {
  InProcessDaemon d;
  UniqueFd fd = raw_connect(d);
  std::vector<uint8_t> b;
  ASSERT_TRUE(wire::append_frame(b, wire::Frame{9, wire::Hello{d.job(), 0, ""}}));
  b[8] = wire::kVersion + 1;  // a newer client's version
  ASSERT_TRUE(raw_send(fd.get(), b));
  RawReplies r = raw_read(fd.get(), 1);
  ASSERT_EQ(r.frames.size(), 1u);
  ASSERT_TRUE(as_error(r.frames[0]));
  EXPECT_EQ(as_error(r.frames[0])->code, wire::ErrorCode::kBadVersion);
  EXPECT_NE(as_error(r.frames[0])->message.find("version " + std::to_string(wire::kVersion + 1)), std::string::npos);
  EXPECT_EQ(r.frames[0].request_id, 9u);
}

TEST(Daemon, TimelineLargerThanOneFrameIsPagedIntoOneDocument) {
  InProcessDaemon d;
  auto e = d.connect();
  for (int i = 0; i < 10; ++i) e->add_task(TaskSpec{0, 0, 1.0, 0, {}, "k" + std::to_string(i)});
  d.engine().set_timeline_padding(9u << 20);  // 9 MiB: two pages of at most 8 MiB
  const std::string got = e->timeline_json();
  EXPECT_EQ(got, d.engine().timeline_json());
  EXPECT_GT(got.size(), 9u << 20);
  d.engine().set_timeline_padding(0);
  EXPECT_EQ(e->timeline_json(), d.engine().timeline_json());
}

TEST(Daemon, ShutdownRequestStopsTheDaemonAndReleasesWaiters) {
  InProcessDaemon d;
  auto e = d.connect(0);
  e->register_rank(0);
  const EventId id = e->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  auto waiting = std::async(std::launch::async, [&] { return e->wait_final(id); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  std::string err;
  EXPECT_TRUE(shutdown_daemon(d.options(), &err)) << err;
  EXPECT_FALSE(waiting.get());  // not final: the daemon stopped first
  ASSERT_TRUE(eventually([&] { return d.done(); }));
  EXPECT_EQ(d.exit_reason(), ServerExit::kShutdownRequest);
  EXPECT_TRUE(d.engine().was_shut_down());
  // The connection is gone: every call now fails at once with its error value.
  EXPECT_EQ(e->add_task(TaskSpec{}), kNoEvent);
  EXPECT_FALSE(e->query(id));
  EXPECT_FALSE(e->is_final(id));
  EXPECT_FALSE(e->wait_final(id));
  EXPECT_EQ(e->timeline_json(), "");
  e->set_rank_floor(0, 1);  // void calls just return
  struct stat st {};
  EXPECT_NE(::stat(d.socket().c_str(), &st), 0) << "socket file left behind";
  // With no daemon left, shutdown_daemon has nothing to do.
  EXPECT_TRUE(shutdown_daemon(d.options(), &err)) << err;
}

TEST(Daemon, ADaemonThatGoesAwayWakesEveryWaitingCall) {
  InProcessDaemon d;
  auto e = d.connect(0);
  e->register_rank(0);
  const EventId id = e->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  std::vector<std::future<std::optional<Interval>>> waits;
  for (int i = 0; i < 4; ++i)
    waits.push_back(std::async(std::launch::async, [&] { return e->wait_final(id); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  d.stop();
  for (auto& w : waits) EXPECT_FALSE(w.get());
  EXPECT_EQ(e->add_flow(FlowSpec{}), kNoEvent);
}

TEST(Daemon, LocalShutdownOnlyDisconnectsThisClient) {
  InProcessDaemon d;
  auto a = d.connect(0);
  auto b = d.connect(1);
  a->register_rank(0);
  const EventId id = a->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  auto waiting = std::async(std::launch::async, [&] { return a->wait_final(id); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  a->shutdown();
  EXPECT_FALSE(waiting.get());
  EXPECT_EQ(a->add_task(TaskSpec{}), kNoEvent);
  EXPECT_NE(b->add_task(TaskSpec{}), kNoEvent);
  EXPECT_FALSE(d.done());
  EXPECT_TRUE(eventually([&] { return d.engine().registered_ranks().empty(); }));
}

TEST(Daemon, ExitsWhenIdle) {
  ServerOptions o;
  o.idle_timeout_s = 0.2;
  InProcessDaemon d(o);
  {
    auto e = d.connect();
    EXPECT_NE(e->add_task(TaskSpec{}), kNoEvent);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_FALSE(d.done()) << "exited while a client was connected";
  }
  ASSERT_TRUE(eventually([&] { return d.done(); }));
  EXPECT_EQ(d.exit_reason(), ServerExit::kIdle);
}

TEST(Daemon, UnixSocketIsPrivateAndPeersAreChecked) {
  InProcessDaemon d;
  struct stat st {};
  ASSERT_EQ(::stat(d.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  // The peer check itself: same uid only.
  EXPECT_TRUE(daemon::uid_may_connect(1000, 1000));
  EXPECT_FALSE(daemon::uid_may_connect(0, 1000));
  EXPECT_FALSE(daemon::uid_may_connect(1001, 1000));
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  uid_t uid = 12345;
  EXPECT_TRUE(daemon::peer_uid(sv[0], &uid));
  EXPECT_EQ(uid, ::geteuid());
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(Daemon, APeerOfAnotherUidIsRefused) {
  // The daemon believes it belongs to some other user, so this process is the stranger.
  ServerOptions o;
  o.owner_uid = ::geteuid() + 1;
  InProcessDaemon d(o);
  std::string err;
  auto e = connect_engine(d.options(), &err);
  EXPECT_FALSE(e);
  EXPECT_NE(err.find("another user"), std::string::npos) << err;
}

TEST(Daemon, TcpNeedsTheJobToken) {
  ServerOptions bad;
  bad.tcp_listen = "127.0.0.1:0";
  bad.unix_path = "";
  std::string err;
  FakeEngine engine;
  bad.job = "x";
  EXPECT_FALSE(daemon::Server::create(engine, bad, &err));
  EXPECT_NE(err.find("token"), std::string::npos) << err;

  ServerOptions o;
  o.tcp_listen = "127.0.0.1:0";
  o.token = "s3cret";
  InProcessDaemon d(o);
  const int port = d.server().tcp_port();
  ASSERT_GT(port, 0);
  RemoteOptions ro = d.options(3);
  ro.tcp = "127.0.0.1:" + std::to_string(port);
  ro.token = "s3cret";
  auto e = connect_engine(ro, &err);
  ASSERT_TRUE(e) << err;
  EXPECT_NE(e->add_flow(FlowSpec{0, 9, 1000, 0, {}, "x"}), kNoEvent);

  ro.token = "wrong";
  EXPECT_FALSE(connect_engine(ro, &err));
  EXPECT_NE(err.find("token"), std::string::npos) << err;
  ro.token = "";
  ::unsetenv("VGPU_DAEMON_TOKEN");
  ::unsetenv("VGPU_DAEMON_TOKEN_FILE");
  EXPECT_FALSE(connect_engine(ro, &err));
  EXPECT_NE(e->add_task(TaskSpec{}), kNoEvent);  // refusals leave the good client alone
}

TEST(Daemon, ConnectGivesUpWhenNothingListens) {
  TempDir tmp;
  RemoteOptions o;
  o.job_id = unique_job("nobody");
  o.socket_dir = tmp.path();
  o.start_daemon = false;
  o.connect_timeout_s = 0.2;
  std::string err;
  EXPECT_FALSE(connect_engine(o, &err));
  EXPECT_NE(err.find("no vgpud answered"), std::string::npos) << err;
}

TEST(JobPaths, FileNamesAreSafeDistinctAndFitASocketAddress) {
  using daemon::job_file_stem;
  EXPECT_EQ(job_file_stem("job-1.a_b"), "job-1.a_b");
  EXPECT_EQ(job_file_stem("a/b").find('/'), std::string::npos);
  EXPECT_NE(job_file_stem("a/b"), job_file_stem("a_b"));
  EXPECT_NE(job_file_stem(".."), "..");
  EXPECT_NE(job_file_stem("..")[0], '.');
  const std::string longer(500, 'x');
  EXPECT_LE(job_file_stem(longer).size(), 64u);
  EXPECT_NE(job_file_stem(longer), job_file_stem(longer + "y"));
  daemon::JobPaths p;
  std::string err;
  EXPECT_TRUE(daemon::job_paths("/tmp/d", "j", &p, &err));
  EXPECT_EQ(p.socket, "/tmp/d/j.sock");
  EXPECT_EQ(p.lock, "/tmp/d/j.lock");
  EXPECT_FALSE(daemon::job_paths("/tmp/" + std::string(100, 'd'), "j", &p, &err));
  EXPECT_NE(err.find("VGPU_DAEMON_DIR"), std::string::npos);
  EXPECT_FALSE(daemon::job_paths("/tmp/d", "", &p, &err));
}

TEST(JobPaths, TheSocketDirectoryMustBeOursAndPrivate) {
  TempDir tmp;
  std::string err;
  const std::string dir = tmp.path() + "/sockets";
  ASSERT_TRUE(daemon::ensure_private_dir(dir, &err)) << err;
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // loosened: tightened again
  ASSERT_TRUE(daemon::ensure_private_dir(dir, &err)) << err;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string link = tmp.path() + "/link";
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
  EXPECT_FALSE(daemon::ensure_private_dir(link, &err));
  if (::geteuid() == 0) {  // a directory planted by another user is refused
    const std::string planted = tmp.path() + "/planted";
    ASSERT_EQ(::mkdir(planted.c_str(), 0777), 0);
    ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
    EXPECT_FALSE(daemon::ensure_private_dir(planted, &err));
    EXPECT_NE(err.find("belongs to uid 65534"), std::string::npos) << err;
  }
}

// ShareCollectives through the client API: a collective of one rank is answered at once with
// its flows' latest finish, a message (nranks 0) waits for nobody, a collective with no flow has
// no finish; `registered` counts every connection's ranks (a rank process holds its floor back
// until its whole job is registered).
TEST(Daemon, ShareCollectivesAnswersAndCountsTheJobsRanks) {
  InProcessDaemon d;
  auto a = d.connect(0);
  auto b = d.connect(1);
  ASSERT_TRUE(a && b);
  auto flow = [](uint64_t bytes, double start) { return FlowSpec{0, 1, bytes, start, {}, ""}; };
  a->register_rank(7);
  uint32_t registered = 99;
  uint64_t seq = 0;
  auto round = [&](int rank, double floor) {
    const std::vector<SharedCollective> c = {
        SharedCollective{1, seq, 1, {0}, {flow(2000, 1.0), flow(5000, 1.0)}},
        SharedCollective{2, seq, 0, {}, {flow(1000, 2.0)}},
        SharedCollective{3, seq, 1, {0}, {}},
    };
    ++seq;
    return share_collectives(*a, c, rank, floor, &registered);
  };
  auto got = round(7, 0.5);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(got[0].finish);
  EXPECT_EQ(*got[0].finish, 1.0 + FakeEngine::flow_duration(5000));
  EXPECT_EQ(got[0].covered, 1u);
  ASSERT_TRUE(got[1].finish);
  EXPECT_EQ(*got[1].finish, 2.0 + FakeEngine::flow_duration(1000));
  EXPECT_FALSE(got[2].finish);  // nothing placed
  EXPECT_EQ(registered, 1u);
  b->register_rank(8);
  b->register_rank(8);  // twice: still one rank
  got = round(8, 3.0);  // rank 8 is b's: no floor moved
  EXPECT_EQ(registered, 2u);
  b.reset();  // b leaves: its rank goes
  EXPECT_TRUE(eventually([&] {
    round(7, 0.5);
    return registered == 1u;
  }));
  EXPECT_EQ(d.engine().registered_ranks(), (std::set<int>{7}));
}

wire::SharedItem share_item(uint64_t comm, uint64_t seq, uint32_t nranks, std::vector<int32_t> ranks, uint64_t bytes,
                            double start) {
  return wire::SharedItem{comm, seq, nranks, std::move(ranks), {FlowSpec{0, 1, bytes, start, {}, ""}}};
}

const wire::SharedFinishes* as_finishes(const RawReplies& r, size_t i = 0) {
  return r.frames.size() > i ? std::get_if<wire::SharedFinishes>(&r.frames[i].body) : nullptr;
}

// A collective's request is held until every rank of its key placed its flows, whichever
// connection they come from; the connection answers its other requests meanwhile; every rank
// then gets the latest finish of all the key's flows (the others' included).
TEST(Daemon, ShareCollectivesIsHeldUntilEveryRankOfItsKeyPlacedItsFlows) {
  InProcessDaemon d;
  UniqueFd a = raw_connect(d), b = raw_connect(d), c = raw_connect(d);
  raw_hello(a.get(), d.job());
  raw_hello(b.get(), d.job());
  raw_hello(c.get(), d.job());
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{10, wire::ShareCollectives{0, std::nullopt, {share_item(7, 0, 3, {0}, 2000, 1.0)}}}));
  ASSERT_TRUE(raw_send(b.get(), wire::Frame{11, wire::ShareCollectives{0, std::nullopt, {share_item(7, 0, 3, {1}, 5000, 1.0)}}}));
  // Two of three ranks: neither is answered, and a's later request is.
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{12, wire::Query{1}}));
  RawReplies ra = raw_read(a.get(), 1);
  ASSERT_EQ(ra.frames.size(), 1u);
  EXPECT_EQ(ra.frames[0].request_id, 12u);
  EXPECT_TRUE(std::holds_alternative<wire::IntervalReply>(ra.frames[0].body));
  EXPECT_TRUE(raw_read(a.get(), 1, 0.3).frames.empty());
  EXPECT_TRUE(raw_read(b.get(), 1, 0.3).frames.empty());
  // The third rank: every one answered, with the latest of the three flows.
  ASSERT_TRUE(raw_send(c.get(), wire::Frame{13, wire::ShareCollectives{0, std::nullopt, {share_item(7, 0, 3, {2}, 1000, 1.0)}}}));
  const uint64_t ids[] = {10, 11, 13};
  const int fds[] = {a.get(), b.get(), c.get()};
  for (int i = 0; i < 3; ++i) {
    RawReplies r = raw_read(fds[i], 1);
    const wire::SharedFinishes* f = as_finishes(r);
    ASSERT_TRUE(f) << "rank " << i;
    EXPECT_EQ(r.frames[0].request_id, ids[i]);
    ASSERT_EQ(f->answers.size(), 1u);
    ASSERT_TRUE(f->answers[0].finish);
    EXPECT_EQ(*f->answers[0].finish, 1.0 + FakeEngine::flow_duration(5000));
    EXPECT_EQ(f->answers[0].covered, 3u);
  }
}

// Two processes take two collectives in opposite orders, each sending both requests before
// reading a reply: vgpud holds neither connection's later request behind its held one, so all
// four are answered (a barrier taken one collective at a time would wait for ever here).
TEST(Daemon, TwoKeysSentInOppositeOrdersByTwoConnectionsAreBothAnswered) {
  InProcessDaemon d;
  UniqueFd a = raw_connect(d), b = raw_connect(d);
  raw_hello(a.get(), d.job());
  raw_hello(b.get(), d.job());
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{20, wire::ShareCollectives{0, std::nullopt, {share_item(1, 0, 2, {0}, 1000, 0)}}}));
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{21, wire::ShareCollectives{0, std::nullopt, {share_item(2, 0, 2, {0}, 3000, 0)}}}));
  ASSERT_TRUE(raw_send(b.get(), wire::Frame{30, wire::ShareCollectives{0, std::nullopt, {share_item(2, 0, 2, {1}, 4000, 0)}}}));
  ASSERT_TRUE(raw_send(b.get(), wire::Frame{31, wire::ShareCollectives{0, std::nullopt, {share_item(1, 0, 2, {1}, 2000, 0)}}}));
  std::map<uint64_t, double> got;
  for (int fd : {a.get(), b.get()}) {
    RawReplies r = raw_read(fd, 2);
    ASSERT_EQ(r.frames.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const wire::SharedFinishes* f = as_finishes(r, i);
      ASSERT_TRUE(f && f->answers.size() == 1 && f->answers[0].finish);
      got[r.frames[i].request_id] = *f->answers[0].finish;
    }
  }
  EXPECT_EQ(got[20], FakeEngine::flow_duration(2000));  // comm 1: the later of 1000 and 2000 B
  EXPECT_EQ(got[31], FakeEngine::flow_duration(2000));
  EXPECT_EQ(got[21], FakeEngine::flow_duration(4000));  // comm 2
  EXPECT_EQ(got[30], FakeEngine::flow_duration(4000));
}

// A rank that never places its flows (died, or has no vgpud) holds a key no longer than the
// share timeout: it is answered from the flows placed so far, counting the ranks that placed.
TEST(Daemon, AKeyNotCoveredInTimeIsAnsweredFromTheFlowsPlaced) {
  ServerOptions o;
  o.share_timeout_s = 0.2;
  InProcessDaemon d(o);
  UniqueFd a = raw_connect(d), b = raw_connect(d);
  raw_hello(a.get(), d.job());
  raw_hello(b.get(), d.job());
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{40, wire::ShareCollectives{0, std::nullopt, {share_item(5, 0, 3, {0}, 1000, 1.0)}}}));
  ASSERT_TRUE(raw_send(b.get(), wire::Frame{41, wire::ShareCollectives{0, std::nullopt, {share_item(5, 0, 3, {1}, 6000, 1.0)}}}));
  for (int fd : {a.get(), b.get()}) {
    RawReplies r = raw_read(fd, 1);
    const wire::SharedFinishes* f = as_finishes(r);
    ASSERT_TRUE(f && f->answers.size() == 1 && f->answers[0].finish);
    EXPECT_EQ(*f->answers[0].finish, 1.0 + FakeEngine::flow_duration(6000));
    EXPECT_EQ(f->answers[0].covered, 2u);  // rank 2 never came
  }
  // The next collective of that communicator does not wait for the missing rank again.
  ASSERT_TRUE(raw_send(a.get(), wire::Frame{42, wire::ShareCollectives{0, std::nullopt, {share_item(5, 1, 3, {0}, 1000, 2.0)}}}));
  ASSERT_TRUE(raw_send(b.get(), wire::Frame{43, wire::ShareCollectives{0, std::nullopt, {share_item(5, 1, 3, {1}, 1000, 2.0)}}}));
  for (int fd : {a.get(), b.get()}) {
    RawReplies r = raw_read(fd, 1);
    const wire::SharedFinishes* f = as_finishes(r);
    ASSERT_TRUE(f && f->answers.size() == 1);
    EXPECT_EQ(f->answers[0].covered, 2u);
  }
}

// The barrier on its own clock: a key past its deadline is answered from what was placed, with
// the ranks that placed; the communicator's next key then does not wait for the missing rank
// (answered as soon as the others placed, long before its own deadline); the rank placing again
// is waited for again; a rank late for a key already answered is answered at once, from its own
// flows.
TEST(ShareBarrier, TimesOutOncePerCommunicatorAndForgetsNoKeyItAnswered) {
  FakeEngine engine;
  daemon::ShareBarrier barrier(engine, nullptr, 60);
  using Clock = daemon::ShareBarrier::Clock;
  const Clock::time_point t0{};
  const auto at = [&](double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  auto send = [&](uint64_t client, uint64_t seq, int32_t rank, uint64_t bytes, double when) {
    barrier.submit(client, seq * 10 + client, wire::ShareCollectives{0, std::nullopt, {share_item(9, seq, 3, {rank}, bytes, 0)}},
                   false, at(when));
  };
  send(1, 0, 0, 1000, 0);
  send(2, 0, 1, 3000, 0);
  EXPECT_TRUE(barrier.take(at(59)).empty());
  ASSERT_TRUE(barrier.next_deadline());
  EXPECT_EQ(*barrier.next_deadline(), at(60));
  auto late = barrier.take(at(60));
  ASSERT_EQ(late.size(), 2u);
  for (const auto& r : late) {
    ASSERT_EQ(r.reply.answers.size(), 1u);
    EXPECT_EQ(r.reply.answers[0].finish, FakeEngine::flow_duration(3000));
    EXPECT_EQ(r.reply.answers[0].covered, 2u);
  }
  EXPECT_EQ(barrier.open_keys(), 0u);
  // Rank 2 missed key 0: key 1 is answered once ranks 0 and 1 placed, not at its deadline.
  send(1, 1, 0, 1000, 61);
  EXPECT_TRUE(barrier.take(at(61)).empty());
  send(2, 1, 1, 1000, 61);
  EXPECT_EQ(barrier.take(at(61)).size(), 2u);
  // Rank 2, late for key 0 (answered already): answered at once from its own flow.
  send(3, 0, 2, 7000, 62);
  auto own = barrier.take(at(62));
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].reply.answers[0].finish, FakeEngine::flow_duration(7000));
  EXPECT_EQ(own[0].reply.answers[0].covered, 1u);
  // Rank 2 is back on comm 9: key 2 waits for it again.
  send(3, 2, 2, 1000, 63);
  send(1, 2, 0, 1000, 63);
  EXPECT_TRUE(barrier.take(at(63)).empty());
  send(2, 2, 1, 1000, 63);
  EXPECT_EQ(barrier.take(at(63)).size(), 3u);
  EXPECT_EQ(barrier.held_requests(), 0u);
}

// A vgpud of another protocol version (another build) answers Hello in its version: the client
// gives up at once with one line naming both versions, rather than retrying to its timeout.
TEST(Daemon, AVgpudOfAnotherVersionIsRefusedAtOnceWithBothVersions) {
  TempDir tmp;
  const std::string job = unique_job("oldver");
  daemon::JobPaths paths;
  std::string err;
  ASSERT_TRUE(daemon::job_paths(tmp.path(), job, &paths, &err)) << err;
  UniqueFd listener = daemon::listen_unix(paths.socket, &err);
  ASSERT_TRUE(listener) << err;
  std::thread old([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) return;
    UniqueFd c(::accept(listener.get(), nullptr, nullptr));  // blocking: the listener's flag is not inherited
    if (!c) return;
    std::vector<uint8_t> frame;
    wire::append_frame(frame, wire::Frame{1, wire::ErrorReply{wire::ErrorCode::kBadVersion, "old"}});
    frame[8] = static_cast<uint8_t>(wire::kVersion - 1);  // the version field, as an older vgpud writes it
    ::send(c.get(), frame.data(), frame.size(), MSG_NOSIGNAL);
    char sink[256];
    while (::recv(c.get(), sink, sizeof(sink), 0) > 0) {
    }
  });
  RemoteOptions o;
  o.job_id = job;
  o.socket_dir = tmp.path();
  o.start_daemon = false;
  o.connect_timeout_s = 30;
  auto e = connect_engine(o, &err);
  EXPECT_FALSE(e);
  EXPECT_NE(err.find("protocol version " + std::to_string(wire::kVersion - 1)), std::string::npos) << err;
  EXPECT_NE(err.find("this client " + std::to_string(wire::kVersion)), std::string::npos) << err;
  EXPECT_EQ(err.find("no vgpud answered"), std::string::npos) << "retried to its timeout: " << err;
  e.reset();
  ::shutdown(listener.get(), SHUT_RDWR);
  old.join();
}

}  // namespace
}  // namespace simcore::testing
