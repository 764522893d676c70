// The ncclUniqueId of a job whose ranks are processes, passed through a file: rank 0 creates it
// and writes ID_FILE.tmp, then renames it (so readers never see half of it); the others wait for
// the file (up to 10 minutes). Shared by the test programs that run as several processes.
#pragma once

#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// False (after a "FAIL" line) when the id could not be made, written or read.
inline bool share_nccl_id(const std::string& path, int rank, ncclUniqueId* id) {
  *id = ncclUniqueId{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      std::printf("FAIL rank 0: ncclGetUniqueId -> %s\n", ncclGetErrorString(r));
      return false;
    }
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(id, sizeof *id, 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::printf("FAIL rank 0: cannot write %s\n", path.c_str());
      return false;
    }
    return true;
  }
  for (int tries = 0; tries < 60000; ++tries) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f != nullptr) {
      const bool ok = std::fread(id, sizeof *id, 1, f) == 1;
      std::fclose(f);
      if (ok) return true;
    }
    usleep(10000);
  }
  std::printf("FAIL rank %d: no id in %s\n", rank, path.c_str());
  return false;
}

// This process's rank of a two-process job (RANK and WORLD_SIZE, as torchrun and launch_ranks.py
// export them) and the tag its output lines start with ("proc <rank> "); false (after a "FAIL"
// line) when the job is not two processes.
inline bool rank_of_two_processes(int* rank, std::string* tag) {
  *rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  const int world = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  *tag = "proc " + std::to_string(*rank) + " ";
  if (world != 2 || *rank < 0 || *rank > 1) {
    std::printf("%sFAIL two processes needed, rank %d of %d\n", tag->c_str(), *rank, world);
    return false;
  }
  return true;
}
