// Where the ranks of one NCCL collective on the sim backend hand each other their data (the sim
// runs no NCCL kernel, so nccl_data.h moves the bytes itself): one file per rank, collective and
// task in a folder of the job under /dev/shm, written once (atomically renamed into place) and
// read by every rank of the collective. The same path serves ranks of one process (several
// virtual GPUs, one thread per rank's stream) and ranks in other processes (torchrun).
//
// Why files: posts are small (VGPU_SIM_NCCL_DATA_BYTES caps them), a collective's posts are
// written once and read once per rank, and the page cache of /dev/shm is shared memory; no
// table to size for unknown communicators, nothing to lock across processes.
//
// Clean-up: a rank posts collective s of a communicator only after it read what it needed of
// the collectives before (one rank's collectives on a communicator run in order); so once a
// rank has collected every rank's post of s, nobody reads its posts before s any more and it
// removes them. vgpu-run removes the folder at the end of the job.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vgpu {

class NcclDataExchange {
 public:
  // `dir`: the job's folder; empty: NcclRendezvous::default_path() + ".data".
  explicit NcclDataExchange(std::string dir = {});

  // Posts `bytes` as rank `rank`'s part of task `task` of collective `seq` on communicator
  // `comm`. False (one log line) when the folder is not usable.
  bool post(uint64_t comm, uint64_t seq, int task, int rank, const void* data, size_t bytes);

  // Rank `rank` will post nothing for collective `seq` of `comm` (it could not learn its
  // buffers): the other ranks stop waiting for it at once.
  void abandon(uint64_t comm, uint64_t seq, int rank);

  // Every rank's post of (comm, seq, task), waiting for the missing ones (real time, no
  // spinning) at most `timeout_s`. False when some rank did not post in time (one log line) or
  // abandoned the collective.
  bool collect(uint64_t comm, uint64_t seq, int task, int nranks, double timeout_s,
               std::vector<std::vector<char>>* out);

  // Rank `rank` collected every rank's post of collective `seq` of `comm`: its own posts of
  // earlier collectives go.
  void done(uint64_t comm, uint64_t seq, int rank);

  // Point-to-point: the k-th send of rank `src` to rank `dst` on `comm` (each side counts its
  // own, in order, as NCCL matches them). send() posts without waiting; receive() waits for it
  // (at most `timeout_s`, then false with one log line), reads it and removes it.
  bool send(uint64_t comm, int src, int dst, uint64_t k, const void* data, size_t bytes);
  bool receive(uint64_t comm, int src, int dst, uint64_t k, double timeout_s, std::vector<char>* out);

  // The virtual arrival (seconds) of the k-th send launch of rank `src` to rank `dst` on `comm`
  // (`receive`: of the matching receive launch's), for the launch that waits for it in another
  // process (nccl_p2p.h): posted at the launch; take_arrival() waits for it at most `timeout_s`
  // (0: only looks), reads it and removes it. False when it did not come in time (no log line:
  // the caller says what it does instead).
  bool post_arrival(uint64_t comm, int src, int dst, uint64_t k, bool receive, double arrival);
  bool take_arrival(uint64_t comm, int src, int dst, uint64_t k, bool receive, double timeout_s, double* arrival);

  const std::string& dir();

 private:
  std::string name(uint64_t comm, uint64_t seq, int task, int rank) const;  // under mu_ (dir_ ready)
  // A message of send/recv, and the mark of a rank that abandoned a collective (under mu_ too).
  std::string p2p_name(uint64_t comm, int src, int dst, uint64_t k) const;
  std::string arrival_name(uint64_t comm, int src, int dst, uint64_t k, bool receive) const;
  std::string abandoned_name(uint64_t comm, uint64_t seq, int rank) const;
  bool ready();                                                            // under mu_
  static bool put(const std::string& path, const void* data, size_t bytes);  // written, then renamed in

  std::mutex mu_;
  std::string dir_;
  bool tried_ = false, ok_ = false;
  // (comm, rank) -> the files it posted, by collective
  std::map<std::pair<uint64_t, int>, std::deque<std::pair<uint64_t, std::string>>> posted_;
};

}  // namespace vgpu
