#include "server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/log.h"
#include "protocol.h"
#include "session.h"
#include "socket_io.h"
#include "wait_pool.h"

namespace simcore::daemon {

const char* to_string(ServerExit e) {
  switch (e) {
    case ServerExit::kIdle: return "idle timeout";
    case ServerExit::kShutdownRequest: return "shutdown request";
    case ServerExit::kStopped: return "stopped";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
using namespace wire;

// epoll tags: the fixed sockets, then one per client.
constexpr uint64_t kStopTag = 1, kUnixTag = 2, kTcpTag = 3, kWaitTag = 4, kFirstClientTag = 16;
constexpr size_t kReadChunk = 64u << 10;
constexpr int kReadsPerWake = 4;      // fairness: at most 256 KiB from one client per round
constexpr double kFinalFlushS = 1.0;  // how long exit waits for replies to drain

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Client {
  Client(uint64_t tag, UniqueFd f, bool is_tcp, Session s)
      : tag(tag), fd(std::move(f)), tcp(is_tcp), session(std::move(s)) {}
  uint64_t tag;
  UniqueFd fd;
  bool tcp;
  Session session;
  std::vector<uint8_t> in;
  size_t in_off = 0;
  std::vector<uint8_t> out;
  size_t out_off = 0;
  bool closing = false;     // close once `out` is flushed
  bool dead = false;        // drop at the end of this round
  bool eof = false;
  bool polling_out = false; // EPOLLOUT registered
  size_t waits = 0;         // wait_final requests running on the pool
};

class EpollServer final : public Server {
 public:
  EpollServer(Engine& engine, ServerOptions options) : engine_(engine), opt_(std::move(options)) {}
  ~EpollServer() override { remove_socket_file(); }

  bool init(std::string* error);
  ServerExit run() override;
  void stop() override {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_.get(), &one, sizeof(one));
  }
  int tcp_port() const override { return tcp_port_; }

 private:
  void watch(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void set_events(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &ev);
  }

  void accept_all(int listen_fd, uint64_t tag);
  void read_from(Client& c);
  void process_frames(Client& c);
  void queue(Client& c, uint64_t request_id, Body body);
  void queue_error(Client& c, uint64_t request_id, ErrorCode code, std::string message);
  void flush(Client& c);
  void drop(Client& c);
  void park_wait(Client& c, uint64_t request_id, const Session::Outcome& o);
  void deliver_waits();
  void deliver_shares();
  void drain_before_exit();
  void remove_socket_file();
  ServerExit finish(ServerExit why);
  Client* find(uint64_t tag) {
    auto it = clients_.find(tag);
    return it == clients_.end() ? nullptr : it->second.get();
  }

  Engine& engine_;
  ServerOptions opt_;
  UniqueFd ep_, stop_, unix_, tcp_;
  int tcp_port_ = 0;
  ino_t unix_ino_ = 0;
  bool socket_removed_ = false;
  std::unordered_map<uint64_t, std::unique_ptr<Client>> clients_;
  std::unique_ptr<WaitPool> waits_;
  uint64_t next_tag_ = kFirstClientTag;  // never reused: a late answer cannot reach a newcomer
  uint32_t registered_ = 0;  // ranks registered by all sessions (SessionPolicy::registered)
  ShareBarrier shares_{engine_, &registered_, opt_.share_timeout_s};  // held ShareCollectives requests
  // Requests served, by message type (logged at exit: round trips a job made, by kind).
  std::map<MsgType, uint64_t> served_;
  bool shutdown_requested_ = false;
  bool accepted_ = false;     // a client arrived this round
  Clock::time_point accept_paused_until_{};
  bool accept_paused_ = false;
};

bool EpollServer::init(std::string* error) {
  ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ep_ || !stop_) {
    *error = fmt::format("epoll/eventfd: {}", std::strerror(errno));
    return false;
  }
  watch(stop_.get(), kStopTag, EPOLLIN);
  waits_ = std::make_unique<WaitPool>(engine_, opt_.max_wait_threads);
  if (!waits_->ok()) {
    *error = fmt::format("eventfd: {}", std::strerror(errno));
    return false;
  }
  watch(waits_->notify_fd(), kWaitTag, EPOLLIN);
  if (!opt_.unix_path.empty()) {
    unix_ = listen_unix(opt_.unix_path, error);
    if (!unix_) return false;
    struct stat st {};
    if (::stat(opt_.unix_path.c_str(), &st) == 0) unix_ino_ = st.st_ino;
    watch(unix_.get(), kUnixTag, EPOLLIN);
  }
  if (!opt_.tcp_listen.empty()) {
    if (opt_.token.empty()) {
      *error = "TCP needs a job token (VGPU_DAEMON_TOKEN or --token-file): refusing to listen "
               "on the network without one";
      return false;
    }
    tcp_ = listen_tcp(opt_.tcp_listen, &tcp_port_, error);
    if (!tcp_) return false;
    watch(tcp_.get(), kTcpTag, EPOLLIN);
  }
  if (!unix_ && !tcp_) {
    *error = "nothing to listen on";
    return false;
  }
  return true;
}

void EpollServer::remove_socket_file() {
  if (unix_ino_ == 0 || socket_removed_) return;
  socket_removed_ = true;
  // Only our own socket: a successor daemon may have bound the path already.
  struct stat st {};
  if (::stat(opt_.unix_path.c_str(), &st) == 0 && st.st_ino == unix_ino_)
    ::unlink(opt_.unix_path.c_str());
}

void EpollServer::accept_all(int listen_fd, uint64_t tag) {
  for (;;) {
    UniqueFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop listening for a moment rather than spin on a readable socket.
        vgpu::log::once(vgpu::log::Level::error, "vgpud-accept",
                        fmt::format("vgpud: accept failed: {}", std::strerror(errno)));
        accept_paused_ = true;
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        if (unix_) set_events(unix_.get(), kUnixTag, 0);
        if (tcp_) set_events(tcp_.get(), kTcpTag, 0);
      }
      return;  // EAGAIN: all accepted
    }
    accepted_ = true;
    const bool is_tcp = tag == kTcpTag;
    const uint64_t ctag = next_tag_++;
    SessionPolicy policy{opt_.job, opt_.token, is_tcp, static_cast<uint32_t>(::getpid()), &registered_, &shares_, ctag};
    auto client = std::make_unique<Client>(ctag, std::move(fd), is_tcp,
                                           Session(engine_, std::move(policy)));
    Client& c = *client;
    watch(c.fd.get(), ctag, EPOLLIN | EPOLLRDHUP);
    clients_.emplace(ctag, std::move(client));
    if (is_tcp) {
      const int one = 1;
      ::setsockopt(c.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    } else {
      uid_t uid = 0;
      if (!peer_uid(c.fd.get(), &uid) || !uid_may_connect(uid, opt_.owner_uid)) {
        vgpu::log::warn("vgpud: refused a connection from uid {} (only uid {} may connect)",
                        static_cast<unsigned>(uid), static_cast<unsigned>(opt_.owner_uid));
        queue_error(c, 0, ErrorCode::kForbidden,
                    "this daemon belongs to another user; connection refused");
        c.closing = true;
        flush(c);
      }
    }
  }
}

void EpollServer::read_from(Client& c) {
  for (int i = 0; i < kReadsPerWake && !c.eof && !c.dead; ++i) {
    const size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    const ssize_t k = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, MSG_DONTWAIT);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(k, 0)));
    if (k > 0) {
      if (static_cast<size_t>(k) < kReadChunk) break;
      continue;
    }
    if (k == 0) {
      c.eof = true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      c.dead = true;
    }
    break;
  }
  // Requests that arrived before a hang-up still count (e.g. a last unregister_rank).
  process_frames(c);
  if (c.eof) c.dead = true;
}

void EpollServer::process_frames(Client& c) {
  while (!c.closing && !c.dead) {
    const std::span<const uint8_t> pending(c.in.data() + c.in_off, c.in.size() - c.in_off);
    DecodeError err = DecodeError::kNone;
    const size_t size = split_frame(pending, &err);
    if (err != DecodeError::kNone) {
      queue_error(c, 0, ErrorCode::kBadFrame, fmt::format("bad frame: {}", to_string(err)));
      c.closing = true;
      break;
    }
    if (size == 0) break;
    Decoded d = decode_frame(pending.first(size));
    c.in_off += size;
    if (!d.frame) {
      if (d.error == DecodeError::kBadVersion)
        queue_error(c, d.request_id, ErrorCode::kBadVersion,
                    fmt::format("client speaks protocol version {}, this vgpud speaks {}",
                                d.version, kVersion));
      else
        queue_error(c, d.request_id, ErrorCode::kBadFrame,
                    fmt::format("bad frame: {}", to_string(d.error)));
      c.closing = true;
      break;
    }
    ++served_[type_of(d.frame->body)];
    Session::Outcome o = c.session.handle(*d.frame);
    switch (o.next) {
      case Session::Next::kReply:
        queue(c, d.request_id, std::move(o.reply));
        break;
      case Session::Next::kWait:
        park_wait(c, d.request_id, o);
        break;
      case Session::Next::kReplyAndClose:
        queue(c, d.request_id, std::move(o.reply));
        c.closing = true;
        break;
      case Session::Next::kHeld:
        break;  // deliver_shares() answers it, maybe below
      case Session::Next::kReplyAndStop:
        queue(c, d.request_id, std::move(o.reply));
        shutdown_requested_ = true;
        break;
    }
  }
  // Keep the unread tail (at most one partial frame) at the front of the buffer.
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > 0) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_off));
    c.in_off = 0;
  }
  if (c.closing) c.in.clear();
  flush(c);
  deliver_shares();  // a request of this client may have covered others' keys
}

void EpollServer::queue(Client& c, uint64_t request_id, Body body) {
  if (!append_frame(c.out, Frame{request_id, std::move(body)})) {
    queue_error(c, request_id, ErrorCode::kInternal, "reply could not be encoded");
    return;
  }
  if (c.out.size() - c.out_off > opt_.max_output_bytes) {
    vgpu::log::warn("vgpud: dropping client (rank {}): it leaves {} bytes of replies unread",
                    c.session.rank(), c.out.size() - c.out_off);
    c.dead = true;
  }
}

void EpollServer::queue_error(Client& c, uint64_t request_id, ErrorCode code,
                              std::string message) {
  if (message.size() > kMaxMessageBytes) message.resize(kMaxMessageBytes);
  vgpu::log::debug("vgpud: error to client (rank {}): {}", c.session.rank(), message);
  append_frame(c.out, Frame{request_id, ErrorReply{code, std::move(message)}});
}

void EpollServer::flush(Client& c) {
  while (!c.dead && c.out_off < c.out.size()) {
    const ssize_t k = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c.out_off += static_cast<size_t>(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c.polling_out) {
        set_events(c.fd.get(), c.tag, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
        c.polling_out = true;
      }
      if (c.out_off > (1u << 20)) {
        c.out.erase(c.out.begin(), c.out.begin() + static_cast<ptrdiff_t>(c.out_off));
        c.out_off = 0;
      }
      return;
    } else {
      c.dead = true;
      return;
    }
  }
  c.out.clear();
  c.out_off = 0;
  if (c.polling_out && !c.dead) {
    set_events(c.fd.get(), c.tag, EPOLLIN | EPOLLRDHUP);
    c.polling_out = false;
  }
  if (c.closing) c.dead = true;
}

void EpollServer::drop(Client& c) {
  c.session.end();  // its ranks stop holding the floor back; its waits' answers are discarded
  ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  clients_.erase(c.tag);
}

void EpollServer::park_wait(Client& c, uint64_t request_id, const Session::Outcome& o) {
  if (c.waits >= opt_.max_waits_per_client) {
    queue_error(c, request_id, ErrorCode::kOverloaded,
                fmt::format("more than {} wait_final calls pending on one connection",
                            opt_.max_waits_per_client));
    return;
  }
  if (!waits_->submit({c.tag, request_id, o.wait_id, o.wait_rank, o.wait_for_rank})) {
    queue_error(c, request_id, ErrorCode::kOverloaded,
                "the daemon has too many wait_final calls pending");
    return;
  }
  ++c.waits;
}

void EpollServer::deliver_waits() {
  std::vector<uint64_t> touched;
  for (WaitPool::Done& d : waits_->take()) {
    Client* c = find(d.client);
    if (!c || c->dead) continue;  // it left: nobody to tell
    --c->waits;
    if (!d.error.empty())
      queue_error(*c, d.request, ErrorCode::kInternal, "engine error: " + d.error);
    else
      queue(*c, d.request, IntervalReply{d.interval});
    touched.push_back(d.client);
  }
  for (uint64_t tag : touched)
    if (Client* c = find(tag)) flush(*c);
}

// The held ShareCollectives answers that are ready now (keys covered, or timed out).
void EpollServer::deliver_shares() {
  std::vector<uint64_t> touched;
  for (ShareBarrier::Ready& r : shares_.take(Clock::now())) {
    Client* c = find(r.client);
    if (!c || c->dead) continue;  // it left: nobody to tell
    queue(*c, r.request, std::move(r.reply));
    touched.push_back(r.client);
  }
  for (uint64_t tag : touched)
    if (Client* c = find(tag)) flush(*c);
}

// Gives clients a moment to receive their last replies (the answers to parked waits, the Ack
// of a Shutdown) before their sockets close.
void EpollServer::drain_before_exit() {
  const auto start = Clock::now();
  for (auto& [tag, c] : clients_) flush(*c);
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& [tag, c] : clients_)
      if (!c->dead && c->out_off < c->out.size()) fds.push_back({c->fd.get(), POLLOUT, 0});
    const double left = kFinalFlushS - seconds_since(start);
    if (fds.empty() || left <= 0) return;
    ::poll(fds.data(), fds.size(), static_cast<int>(std::ceil(left * 1000)));
    for (auto& [tag, c] : clients_) flush(*c);
  }
}

ServerExit EpollServer::finish(ServerExit why) {
  remove_socket_file();  // new clients now start a new daemon rather than reach this one
  // The engine is done with: its blocked waits return (not final) and the workers stop.
  try {
    engine_.shutdown();
  } catch (...) {
  }
  waits_->join_all();
  deliver_waits();
  drain_before_exit();
  clients_.clear();
  std::string served;
  for (const auto& [type, n] : served_) served += fmt::format("{}{} {}", served.empty() ? "" : ", ", name_of(type), n);
  vgpu::log::info("vgpud: requests served: {}", served.empty() ? "none" : served);
  vgpu::log::info("vgpud: job '{}' done ({})", opt_.job, to_string(why));
  return why;
}

ServerExit EpollServer::run() {
  auto idle_since = Clock::now();
  std::vector<epoll_event> events(64);
  for (;;) {
    int timeout_ms = -1;
    if (clients_.empty() && opt_.idle_timeout_s >= 0) {
      const double left = opt_.idle_timeout_s - seconds_since(idle_since);
      if (left <= 0) return finish(ServerExit::kIdle);
      timeout_ms = static_cast<int>(std::ceil(left * 1000));
    }
    auto shorten = [&timeout_ms](double s) {
      const int ms = std::max(1, static_cast<int>(std::ceil(s * 1000)));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    };
    if (accept_paused_) shorten(0.1);
    if (const auto due = shares_.next_deadline())
      shorten(std::max(0.0, std::chrono::duration<double>(*due - Clock::now()).count()));

    const int n = ::epoll_wait(ep_.get(), events.data(), static_cast<int>(events.size()),
                               timeout_ms);
    if (n < 0 && errno != EINTR) {
      vgpu::log::error("vgpud: epoll_wait: {}", std::strerror(errno));
      return finish(ServerExit::kStopped);
    }
    const bool had_clients = !clients_.empty();
    accepted_ = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      const uint32_t ev = events[i].events;
      if (tag == kStopTag) return finish(ServerExit::kStopped);
      if (tag == kUnixTag) { accept_all(unix_.get(), kUnixTag); continue; }
      if (tag == kTcpTag) { accept_all(tcp_.get(), kTcpTag); continue; }
      if (tag == kWaitTag) { deliver_waits(); continue; }
      Client* c = find(tag);
      if (!c || c->dead) continue;
      if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) read_from(*c);
      if ((ev & EPOLLOUT) && !c->dead) flush(*c);
    }
    // Held keys past their deadline: answered from what was placed (share_barrier.h).
    if (const auto due = shares_.next_deadline(); due && *due <= Clock::now()) deliver_shares();
    // Drop the clients that left or misbehaved, unregistering their ranks.
    std::vector<uint64_t> gone;
    for (auto& [tag, c] : clients_)
      if (c->dead) gone.push_back(tag);
    for (uint64_t tag : gone) drop(*clients_.at(tag));

    if (accept_paused_ && Clock::now() >= accept_paused_until_) {
      accept_paused_ = false;
      if (unix_) set_events(unix_.get(), kUnixTag, EPOLLIN);
      if (tcp_) set_events(tcp_.get(), kTcpTag, EPOLLIN);
    }
    if (shutdown_requested_) return finish(ServerExit::kShutdownRequest);
    if ((had_clients || accepted_) && clients_.empty()) idle_since = Clock::now();
  }
}

}  // namespace

std::unique_ptr<Server> Server::create(Engine& engine, const ServerOptions& options,
                                       std::string* error) {
  auto s = std::make_unique<EpollServer>(engine, options);
  if (!s->init(error)) return nullptr;
  return s;
}

}  // namespace simcore::daemon
