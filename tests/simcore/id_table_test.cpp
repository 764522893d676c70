// IdTable (simcore/src/id_table.h): ids handed out in order, retired and released in any
// order; a chunk is freed exactly when every one of its ids is both retired and released.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "id_table.h"

namespace simcore::detail {
namespace {

// Ids handed out, retired and released in a random order within a sliding window (as a ring
// with floors does): every live id answers its own slot, a retired one its interval, and a
// chunk is freed exactly when its last id is both retired and released.
TEST(IdTable, ChunksGoOnceEveryIdIsRetiredAndReleased) {
  IdTable t;
  std::mt19937_64 rng(7);
  std::deque<EventId> live;                 // added, not retired
  std::deque<EventId> retired_unreleased;   // retired, not released
  const EventId total = 12 * IdTable::kChunk + 123;
  EventId added = 0;
  auto check_some = [&] {
    for (int k = 0; k < 8 && !live.empty(); ++k) {
      const EventId id = live[rng() % live.size()];
      ASSERT_TRUE(t.present(id));
      ASSERT_EQ(t.slot(id), static_cast<uint32_t>(id * 3));
    }
  };
  while (added < total || !live.empty() || !retired_unreleased.empty()) {
    const int what = static_cast<int>(rng() % 3);
    if (what == 0 && added < total) {
      const EventId id = t.add(static_cast<uint32_t>((added + 1) * 3));
      ASSERT_EQ(id, added + 1);
      ++added;
      live.push_back(id);
    } else if (what == 1 && !live.empty()) {
      const size_t k = rng() % std::min<size_t>(live.size(), 64);
      const EventId id = live[k];
      live.erase(live.begin() + static_cast<long>(k));
      t.retire(id, Interval{static_cast<double>(id), static_cast<double>(id) + 0.5});
      retired_unreleased.push_back(id);
    } else if (what == 2 && !retired_unreleased.empty()) {
      const size_t k = rng() % std::min<size_t>(retired_unreleased.size(), 64);
      const EventId id = retired_unreleased[k];
      retired_unreleased.erase(retired_unreleased.begin() + static_cast<long>(k));
      ASSERT_TRUE(t.present(id));
      ASSERT_EQ(t.slot(id), IdTable::kRetired);
      ASSERT_EQ(t.result(id).finish, static_cast<double>(id) + 0.5);
      t.release(id);
      t.release(id);  // a second release is ignored
    }
    check_some();
  }
  // Every chunk was freed once all its ids were retired and released: all but the last (not
  // full: ids still to come would land in it).
  for (EventId id = 1; id <= (total / IdTable::kChunk) * IdTable::kChunk; ++id) ASSERT_FALSE(t.present(id)) << id;
  for (EventId id = (total / IdTable::kChunk) * IdTable::kChunk + 1; id <= total; ++id) {
    ASSERT_TRUE(t.present(id));
    ASSERT_EQ(t.result(id).start, static_cast<double>(id));
  }
}

// A chunk after one that went, while the chunk between is held: it must not be freed before
// all of its own ids are retired and released (in either order), and ids of the held chunk
// before it stay known after it goes.
TEST(IdTable, AChunkGoesOnlyWithAllItsIdsAndTheFrontStaysKnown) {
  IdTable t;
  const EventId k = IdTable::kChunk;
  for (EventId id = 1; id <= 2 * k; ++id) t.add(1);
  for (EventId id = 1; id <= k; ++id) {
    t.retire(id, Interval{1, 2});
    t.release(id);
  }
  ASSERT_FALSE(t.present(1));
  for (EventId id = 2 * k + 1; id <= 3 * k; ++id) t.add(2);
  // All but one of the new chunk's ids retired and released: still held, every id known.
  for (EventId id = 2 * k + 1; id < 3 * k; ++id) {
    t.retire(id, Interval{3, 4});
    t.release(id);
  }
  EXPECT_TRUE(t.present(3 * k));
  EXPECT_EQ(t.slot(3 * k), 2u);
  // Its last id, released first and retired after: now the chunk goes (after the chunk
  // before it, still held, which keeps the front: ids there stay known).
  t.release(3 * k);
  EXPECT_TRUE(t.present(3 * k));
  t.retire(3 * k, Interval{3, 4});
  EXPECT_TRUE(t.present(k + 1));
  EXPECT_EQ(t.slot(k + 1), 1u);
  for (EventId id = k + 1; id <= 2 * k; ++id) {
    t.retire(id, Interval{1, 2});
    t.release(id);
  }
  EXPECT_FALSE(t.present(k + 1));
  EXPECT_FALSE(t.present(3 * k));
}

// Flow groups' members bound through handles (as Simulator::submit_group() binds them), in a
// sliding window as a ring's steps go: each group retired through its handle at once, some
// members released while live, some rebound to their own slot first (a group split). Every id
// answers its group's slot while live and its group's interval once retired, before and after
// its release; every chunk but the last goes once all its ids are retired and released, and no
// handle is left once every group is closed and every id released.
TEST(IdTable, GroupHandlesRetireTheirMembersAtOnceAndChunksStillGo) {
  IdTable t;
  std::mt19937_64 rng(11);
  struct Group {
    uint32_t handle;
    uint32_t slot;
    std::vector<EventId> ids;      // bound to the handle
    std::vector<EventId> apart;    // rebound to a slot of their own, retired alone
  };
  std::deque<Group> live;
  std::vector<std::pair<EventId, Interval>> retired_unreleased;
  std::vector<bool> released(1, false);
  const int steps = 384;
  uint32_t next_slot = 1;
  for (int s = 0; s < steps || !live.empty(); ++s) {
    if (s < steps) {
      // A step of 32 ids: three groups of interleaved members, the rest alone (384 steps fill
      // three chunks exactly, so that all of them can go).
      std::vector<EventId> ids;
      for (int k = 0; k < 32; ++k) {
        ids.push_back(t.add(IdTable::kRetired));
        released.push_back(false);
      }
      for (int gi = 0; gi < 3; ++gi) {
        Group g{0, next_slot++, {}, {}};
        g.handle = t.open_handle(g.slot, ids[gi]);
        for (int k = gi; k < 32; k += 4) {
          t.bind_handle(ids[k], g.handle, static_cast<uint32_t>(g.ids.size()));
          g.ids.push_back(ids[k]);
        }
        for (size_t j = 0; j < g.ids.size(); ++j) ASSERT_EQ(t.member(g.ids[j]), j);
        // Sometimes a member leaves (a split), sometimes one is released while live.
        if (rng() % 4 == 0) {
          const EventId id = g.ids.back();
          g.ids.pop_back();
          t.rebind(id, next_slot++);
          g.apart.push_back(id);
        }
        if (rng() % 5 == 0) {
          const EventId id = g.ids[rng() % g.ids.size()];
          t.release(id);
          released[id] = true;
        }
        live.push_back(std::move(g));
      }
      for (int k = 3; k < 32; k += 4) {
        t.rebind(ids[k], next_slot++);
        t.retire(ids[k], Interval{double(s), double(s) + 1});
        retired_unreleased.emplace_back(ids[k], Interval{double(s), double(s) + 1});
      }
    }
    for (const Group& g : live)
      for (EventId id : g.ids) ASSERT_EQ(t.slot(id), g.slot) << id;
    // Retire the oldest groups once the window is full (or at the end).
    while (!live.empty() && (live.size() > 30 || s >= steps)) {
      Group g = std::move(live.front());
      live.pop_front();
      const Interval iv{double(g.slot), double(g.slot) + 0.25};
      t.retire_handle(g.handle, iv);
      t.close_handle(g.handle);
      for (EventId id : g.apart) t.retire(id, iv);
      for (EventId id : g.ids) {
        if (released[id]) continue;
        ASSERT_EQ(t.slot(id), IdTable::kRetired);
        ASSERT_EQ(t.result(id).finish, iv.finish);
        retired_unreleased.emplace_back(id, iv);
      }
      for (EventId id : g.apart) retired_unreleased.emplace_back(id, iv);
    }
    // Release some retired ids, in a random order.
    std::shuffle(retired_unreleased.begin(), retired_unreleased.end(), rng);
    const size_t keep = s < steps ? retired_unreleased.size() / 3 : 0;
    while (retired_unreleased.size() > keep) {
      const auto [id, iv] = retired_unreleased.back();
      retired_unreleased.pop_back();
      ASSERT_TRUE(t.present(id));
      ASSERT_EQ(t.slot(id), IdTable::kRetired);
      ASSERT_EQ(t.result(id).start, iv.start);
      t.release(id);
      released[id] = true;
    }
  }
  ASSERT_EQ(t.last(), 3 * IdTable::kChunk);
  for (EventId id = 1; id <= t.last(); ++id) ASSERT_FALSE(t.present(id)) << id;
  EXPECT_EQ(t.handles_held(), 0u);
}

// A caller that never releases keeps every chunk: ids retired with their group's handle keep
// no interval of their own and, once every id of their chunk retired, no position either (the
// array goes to the next chunk's group members), so each further chunk of them holds 4 bytes an
// id; ids retired on their own 20 (slot and interval, no position), each answering its interval.
TEST(IdTable, IdsRetiredThroughTheirHandleKeepFourBytesEach) {
  IdTable t;
  const size_t empty = t.bytes();
  const auto grouped_chunk = [&](uint32_t slot) {
    const EventId first = t.last() + 1;
    const uint32_t handle = t.open_handle(slot, first);
    for (uint32_t k = 0; k < IdTable::kChunk; ++k) t.bind_handle(t.add(IdTable::kRetired), handle, k);
    EXPECT_EQ(t.member(first + 76), 76u);
    t.retire_handle(handle, Interval{double(slot), double(slot) + 1});
    t.close_handle(handle);
  };
  grouped_chunk(5);
  const size_t first = t.bytes() - empty;
  EXPECT_LE(first, size_t{IdTable::kChunk} * 8 + 16384);  // (with the handles' first 8 KB)
  grouped_chunk(6);
  const size_t grouped = t.bytes() - empty - first;
  EXPECT_LE(grouped, size_t{IdTable::kChunk} * 4 + 1024);
  EXPECT_EQ(t.result(IdTable::kChunk).finish, 6);
  EXPECT_EQ(t.result(2 * IdTable::kChunk).finish, 7);
  // A second chunk whose ids retire one by one.
  const EventId base = t.last();
  for (uint32_t k = 0; k < IdTable::kChunk; ++k) t.add(100 + k);
  for (EventId id = base + 1; id <= base + IdTable::kChunk; ++id) t.retire(id, Interval{double(id), double(id) + 0.5});
  const size_t alone = t.bytes() - empty - first - grouped;
  EXPECT_GE(alone, size_t{IdTable::kChunk} * 20);
  EXPECT_LE(alone, size_t{IdTable::kChunk} * 20 + 1024);
  EXPECT_EQ(t.result(base + 9).start, double(base + 9));
  EXPECT_EQ(t.result(base + 9).finish, double(base + 9) + 0.5);
  EXPECT_EQ(t.result(1).start, 5);
}

// A caller that never releases keeps a handle for every group it made: 32 bytes each.
TEST(IdTable, AGroupsHandleIsThirtyTwoBytes) {
  IdTable t;
  t.add(IdTable::kRetired);
  const size_t before = t.bytes();
  for (uint32_t g = 0; g < 1024; ++g) t.open_handle(g, 1);  // 1024: no slack past the last doubling
  EXPECT_EQ(t.handles_held(), 1024u);
  EXPECT_LE(t.bytes() - before, size_t{1024} * 32);
}

}  // namespace
}  // namespace simcore::detail
