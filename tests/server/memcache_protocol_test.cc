// The memcached text protocol handler against the test-only MapStore:
// exact replies (memcached's protocol.txt), each script also fed cut at
// every byte position.
#include "server/memcache_protocol.h"

#include <gtest/gtest.h>

#include <string>

#include "pmindex/version.h"
#include "tests/server/protocol_harness.h"
#include "tests/support/status.h"

namespace pmindex::server::testing {
namespace {

using Mc = Harness<MemcacheProtocol>;

void ExpectScript(std::string_view script, std::string_view expected, bool closes = false,
                  size_t max_value = size_t{1} << 20) {
  ExpectSameForEverySplit<MemcacheProtocol>(script, expected, closes, max_value);
}

// The cas unique of `key` as a "gets" reports it.
uint64_t CasOf(Mc& h, const std::string& key) {
  const std::string r = h.Feed("gets " + key + "\r\n");
  // VALUE <key> <flags> <bytes> <cas>\r\n
  const size_t eol = r.find("\r\n");
  const size_t sp = r.rfind(' ', eol);
  EXPECT_EQ(r.rfind("VALUE ", 0), 0u) << r;
  return std::stoull(r.substr(sp + 1, eol - sp - 1));
}

TEST(Memcache, SetGetAndMultiGet) {
  ExpectScript(
      "set a 5 0 3\r\nabc\r\nset b 0 0 0\r\n\r\nget a\r\nget a missing b\r\nget missing\r\n",
      "STORED\r\nSTORED\r\nVALUE a 5 3\r\nabc\r\nEND\r\n"
      "VALUE a 5 3\r\nabc\r\nVALUE b 0 0\r\n\r\nEND\r\nEND\r\n");
}

TEST(Memcache, DataMayHoldLineEndsAndBinary) {
  const std::string data("x\r\ny\0z\n", 7);
  ExpectScript("set k 4294967295 0 7\r\n" + data + "\r\nget k\r\n",
               "STORED\r\nVALUE k 4294967295 7\r\n" + data + "\r\nEND\r\n");
}

TEST(Memcache, BareNewlineEndsALine) {
  ExpectScript("set a 0 0 1\nx\r\nget a\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
}

TEST(Memcache, AddReplaceAppendPrepend) {
  ExpectScript(
      "add a 1 0 1\r\nx\r\nadd a 2 0 1\r\ny\r\nreplace b 0 0 1\r\nz\r\nreplace a 3 0 2\r\nzz\r\n"
      "append a 9 0 2\r\n>>\r\nprepend a 9 0 2\r\n<<\r\nappend nope 0 0 1\r\nq\r\nget a b\r\n",
      "STORED\r\nNOT_STORED\r\nNOT_STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\nNOT_STORED\r\n"
      "VALUE a 3 6\r\n<<zz>>\r\nEND\r\n");
}

TEST(Memcache, CasStoresOnlyOverTheVersionRead) {
  Mc h;
  EXPECT_EQ(h.Feed("set a 0 0 1\r\nx\r\n"), "STORED\r\n");
  const uint64_t cas = CasOf(h, "a");
  EXPECT_NE(cas, 0u);
  const std::string c = std::to_string(cas);
  EXPECT_EQ(h.Feed("cas a 7 0 1 " + c + "\r\ny\r\n"), "STORED\r\n");
  EXPECT_EQ(h.Feed("cas a 0 0 1 " + c + "\r\nz\r\n"), "EXISTS\r\n");
  EXPECT_EQ(h.Feed("get a\r\n"), "VALUE a 7 1\r\ny\r\nEND\r\n");
  EXPECT_EQ(h.Feed("cas nope 0 0 1 1\r\nz\r\n"), "NOT_FOUND\r\n");
  EXPECT_NE(CasOf(h, "a"), cas);  // every write changes the version
  EXPECT_EQ(Stats::Read(h.stats.cas_hits), 1u);
  EXPECT_EQ(Stats::Read(h.stats.cas_badval), 1u);
  EXPECT_EQ(Stats::Read(h.stats.cas_misses), 1u);
}

TEST(Memcache, Delete) {
  ExpectScript(
      "set a 0 0 1\r\nx\r\ndelete a\r\ndelete a\r\nset b 0 0 1\r\nx\r\ndelete b 0\r\n"
      "delete b 5\r\nget a b\r\n",
      "STORED\r\nDELETED\r\nNOT_FOUND\r\nSTORED\r\nDELETED\r\n"
      "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\nEND\r\n");
}

TEST(Memcache, IncrDecr) {
  ExpectScript(
      "set n 3 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nincr n 18446744073709551615\r\n"
      "incr n 2\r\nincr missing 1\r\nset s 0 0 3\r\nabc\r\nincr s 1\r\nincr n x\r\n"
      "incr n -1\r\nget n\r\n",
      "STORED\r\n15\r\n0\r\n18446744073709551615\r\n1\r\nNOT_FOUND\r\nSTORED\r\n"
      "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
      "CLIENT_ERROR invalid numeric delta argument\r\n"
      "CLIENT_ERROR invalid numeric delta argument\r\nVALUE n 3 1\r\n1\r\nEND\r\n");
}

TEST(Memcache, NoreplySuppressesEveryReply) {
  ExpectScript(
      "set a 0 0 1 noreply\r\nx\r\nadd a 0 0 1 noreply\r\ny\r\nincr a 1 noreply\r\n"
      "set n 0 0 1 noreply\r\n5\r\nincr n 2 noreply\r\ndecr n 1 noreply\r\n"
      "touch n 100 noreply\r\ndelete a noreply\r\ndelete a noreply\r\n"
      "verbosity 1 noreply\r\nget a n\r\nflush_all noreply\r\nget n\r\n",
      "VALUE n 0 1\r\n6\r\nEND\r\nEND\r\n");
}

TEST(Memcache, ExpiryRelativeAbsoluteAndNegative) {
  Mc h;
  const int64_t now_s = kStartMs / 1000;
  EXPECT_EQ(h.Feed("set rel 0 10 1\r\nr\r\nset abs 0 " + std::to_string(now_s + 100) +
                   " 1\r\na\r\nset neg 0 -1 1\r\nn\r\nset never 0 0 1\r\nv\r\n"),
            "STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n");
  EXPECT_EQ(h.Feed("get rel abs neg never\r\n"),
            "VALUE rel 0 1\r\nr\r\nVALUE abs 0 1\r\na\r\nVALUE never 0 1\r\nv\r\nEND\r\n");
  h.now_ms += 10'000;  // rel expires at exactly now + 10 s
  EXPECT_EQ(h.Feed("get rel abs\r\n"), "VALUE abs 0 1\r\na\r\nEND\r\n");
  h.now_ms += 90'000;
  EXPECT_EQ(h.Feed("get abs never\r\n"), "VALUE never 0 1\r\nv\r\nEND\r\n");
  // The expired items were removed as they were read: "never" is left.
  EXPECT_EQ(h.store.Info().keys, 1u);
  EXPECT_EQ(Stats::Read(h.stats.get_expired), 3u);
  // An absolute time in the past is expired at once.
  EXPECT_EQ(h.Feed("set past 0 " + std::to_string(now_s - 5) + " 1\r\np\r\nget past\r\n"),
            "STORED\r\nEND\r\n");
}

TEST(Memcache, ExpiredItemsAreAbsentForEveryCommand) {
  Mc h;
  EXPECT_EQ(h.Feed("set a 0 1 1\r\n1\r\nset b 0 1 1\r\n1\r\nset c 0 1 1\r\n1\r\n"
                   "set d 0 1 1\r\n1\r\nset e 0 1 1\r\n1\r\n"),
            "STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n");
  const std::string cas = std::to_string(CasOf(h, "e"));
  h.now_ms += 1000;
  EXPECT_EQ(h.Feed("add a 0 0 1\r\nA\r\nreplace b 0 0 1\r\nB\r\nincr c 1\r\ntouch d 0\r\n"
                   "cas e 0 0 1 " + cas + "\r\nE\r\ndelete b\r\nget a b c d e\r\n"),
            "STORED\r\nNOT_STORED\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n"
            "VALUE a 0 1\r\nA\r\nEND\r\n");
}

TEST(Memcache, TouchChangesOnlyTheExpiry) {
  Mc h;
  EXPECT_EQ(h.Feed("set a 4 0 1\r\nx\r\ntouch a 2\r\ntouch nope 2\r\n"),
            "STORED\r\nTOUCHED\r\nNOT_FOUND\r\n");
  h.now_ms += 1999;
  EXPECT_EQ(h.Feed("get a\r\n"), "VALUE a 4 1\r\nx\r\nEND\r\n");
  h.now_ms += 1;
  EXPECT_EQ(h.Feed("get a\r\n"), "END\r\n");
}

TEST(Memcache, FlushAllNowAndDelayed) {
  Mc h;
  EXPECT_EQ(h.Feed("set a 0 0 1\r\nx\r\nflush_all\r\nget a\r\n"), "STORED\r\nOK\r\nEND\r\n");
  EXPECT_EQ(h.Feed("set a 0 0 1\r\nx\r\nflush_all 10\r\nset b 0 0 1\r\ny\r\nget a b\r\n"),
            "STORED\r\nOK\r\nSTORED\r\nVALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n");
  h.now_ms += 10'000;  // items written before the deadline go, b included
  EXPECT_EQ(h.Feed("get a b\r\nset c 0 0 1\r\nz\r\nget c\r\n"),
            "END\r\nSTORED\r\nVALUE c 0 1\r\nz\r\nEND\r\n");
  EXPECT_EQ(h.Feed("flush_all x\r\n"), "CLIENT_ERROR bad command line format\r\n");
}

TEST(Memcache, TooLargeIsRefusedAndItsDataSwallowed) {
  // A 64-byte store value leaves 64 - 13 = 51 bytes of data.
  const std::string ok(51, 'o'), big(52, 'b');
  ExpectScript("set a 0 0 51\r\n" + ok + "\r\nset a 0 0 52\r\n" + big + "\r\nget a\r\n",
               "STORED\r\nSERVER_ERROR object too large for cache\r\nVALUE a 0 51\r\n" + ok +
                   "\r\nEND\r\n",
               false, 64);
  // append cannot grow an item past the limit either.
  ExpectScript("set a 0 0 51\r\n" + ok + "\r\nappend a 0 0 1\r\nx\r\n",
               "STORED\r\nNOT_STORED\r\n", false, 64);
}

TEST(Memcache, MalformedCommands) {
  const std::string long_key(251, 'k');
  ExpectScript(
      "bogus\r\n\r\nget\r\nset a b 0 1\r\nx\r\nset a 0 0 -1\r\nset " + long_key +
          " 0 0 1\r\nx\r\nget " + long_key + "\r\nset a 0 0 1 2 3\r\nx\r\n"
          "set a 0 0 3\r\nabcd\r\nincr a\r\ntouch a\r\nstats bogus\r\nget a\r\n",
      "ERROR\r\nERROR\r\nERROR\r\n"
      "CLIENT_ERROR bad command line format\r\n"   // flags not a number; data swallowed
      "CLIENT_ERROR bad command line format\r\n"   // negative length: nothing to swallow
      "CLIENT_ERROR bad command line format\r\n"   // key too long; data swallowed
      "CLIENT_ERROR bad command line format\r\n"   // get of a key too long
      "CLIENT_ERROR bad command line format\r\n"   // extra token; data swallowed
      "CLIENT_ERROR bad data chunk\r\nERROR\r\n"   // 4 bytes for 3: "\n" is left over
      "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n"
      "ERROR\r\nEND\r\n");
}

TEST(Memcache, ByteCountPastMemcachedsBoundSwallowsNothing) {
  // memcached's bound is 2^31 - 3 (the count plus CRLF in a signed 32-bit
  // int): a larger count is a malformed line, and what follows it runs as
  // commands; the largest count allowed is "too large" and its data block
  // is swallowed, as in memcached.
  ExpectScript(
      "set a 0 0 2147483648\r\nset b 0 0 1\r\nx\r\nset a 0 0 2147483646\r\n"
      "add a 0 0 99999999999999999999\r\nappend a 0 0 4294967296 noreply\r\n"
      "cas a 0 0 9223372036854775807 1\r\nget b\r\nset c 0 0 2147483645\r\nget b\r\n",
      "CLIENT_ERROR bad command line format\r\nSTORED\r\n"
      "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n"
      "CLIENT_ERROR bad command line format\r\nVALUE b 0 1\r\nx\r\nEND\r\n"
      "SERVER_ERROR object too large for cache\r\n");
}

TEST(Memcache, GatAndGatsReadAndSetTheExpiry) {
  Mc h;
  ASSERT_EQ(h.Feed("set a 7 0 2\r\nhi\r\nset b 0 100 1\r\nb\r\n"), "STORED\r\nSTORED\r\n");
  // Relative exptime, several keys, a miss among them.
  EXPECT_EQ(h.Feed("gat 10 a nope b\r\n"),
            "VALUE a 7 2\r\nhi\r\nVALUE b 0 1\r\nb\r\nEND\r\n");
  h.now_ms += 9'999;
  EXPECT_EQ(h.Feed("get a b\r\n"), "VALUE a 7 2\r\nhi\r\nVALUE b 0 1\r\nb\r\nEND\r\n");
  // gats reports the version the touch wrote: a cas with it succeeds.
  const std::string r = h.Feed("gats 0 a\r\n");
  ASSERT_EQ(r.rfind("VALUE a 7 2 ", 0), 0u) << r;
  const std::string cas = r.substr(12, r.find("\r\n") - 12);
  EXPECT_EQ(std::to_string(CasOf(h, "a")), cas);
  h.now_ms += 1;  // b is gone (10 s), a never expires now
  EXPECT_EQ(h.Feed("get a b\r\n"), "VALUE a 7 2\r\nhi\r\nEND\r\n");
  EXPECT_EQ(h.Feed("cas a 1 0 1 " + cas + "\r\nx\r\ncas a 1 0 1 " + cas + "\r\ny\r\n"),
            "STORED\r\nEXISTS\r\n");
  // A negative exptime returns the item and expires it.
  EXPECT_EQ(h.Feed("gat -1 a\r\nget a\r\ngat 5 a\r\n"),
            "VALUE a 1 1\r\nx\r\nEND\r\nEND\r\nEND\r\n");
  EXPECT_EQ(Stats::Read(h.stats.touch_hits), 4u);
  EXPECT_EQ(Stats::Read(h.stats.touch_misses), 2u);
  EXPECT_EQ(Stats::Read(h.stats.cmd_touch), 6u);
}

TEST(Memcache, GatMalformed) {
  const std::string long_key(251, 'k');
  ExpectScript("set a 0 0 1\r\nx\r\ngat\r\ngats\r\ngat 10\r\ngat x a\r\ngat 1.5 a\r\n"
               "gat 10 a " + long_key + "\r\ngats 0 a\x01\r\nget a\r\n",
               "STORED\r\nERROR\r\nERROR\r\nEND\r\n"
               "CLIENT_ERROR invalid exptime argument\r\nCLIENT_ERROR invalid exptime argument\r\n"
               "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n"
               "VALUE a 0 1\r\nx\r\nEND\r\n");
}

TEST(Memcache, VerbosityAsMemcached) {
  // A bare "verbosity" is ERROR (memcapable's "ascii verbosity"), a level
  // that is not a number is malformed, a second argument is ignored.
  ExpectScript(
      "verbosity\r\nverbosity 1\r\nverbosity 1 2\r\nverbosity x\r\nverbosity 1 noreply\r\n"
      "verbosity x noreply\r\nverbosity 1 2 3\r\nverbosity -1\r\n",
      "ERROR\r\nOK\r\nOK\r\nCLIENT_ERROR bad command line format\r\nERROR\r\n"
      "CLIENT_ERROR bad command line format\r\n");
}

TEST(Memcache, StatsItemsSlabsSettings) {
  Mc h;
  h.stats.threads = 3;
  // An empty store: no class is listed.
  EXPECT_EQ(h.Feed("stats items\r\n"), "END\r\n");
  EXPECT_EQ(h.Feed("stats slabs\r\n"),
            "STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n");
  ASSERT_EQ(h.Feed("set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\nget a\r\n"),
            "STORED\r\nSTORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  EXPECT_EQ(h.Feed("stats items\r\n"),
            "STAT items:1:number 2\r\nSTAT items:1:evicted 0\r\n"
            "STAT items:1:evicted_nonzero 0\r\nEND\r\n");
  const std::string slabs = h.Feed("stats slabs\r\n");
  EXPECT_NE(slabs.find("STAT 1:used_chunks 2\r\n"), std::string::npos) << slabs;
  EXPECT_NE(slabs.find("STAT 1:get_hits 1\r\n"), std::string::npos) << slabs;
  EXPECT_NE(slabs.find("STAT 1:cmd_set 2\r\n"), std::string::npos) << slabs;
  EXPECT_NE(slabs.find("STAT active_slabs 1\r\n"), std::string::npos) << slabs;
  EXPECT_EQ(slabs.substr(slabs.size() - 5), "END\r\n");
  const std::string settings = h.Feed("stats settings\r\n");
  EXPECT_NE(settings.find("STAT num_threads 3\r\n"), std::string::npos) << settings;
  EXPECT_NE(settings.find("STAT evictions off\r\n"), std::string::npos) << settings;
  EXPECT_NE(settings.find("STAT item_size_max " + std::to_string(h.items.max_data_bytes()) +
                          "\r\n"),
            std::string::npos)
      << settings;
  EXPECT_EQ(settings.substr(settings.size() - 5), "END\r\n");
  // Every line is "STAT <name> <value>".
  size_t lines = 0;
  for (size_t pos = 0; pos < settings.size() - 5; pos = settings.find("\r\n", pos) + 2, ++lines)
    EXPECT_EQ(settings.compare(pos, 5, "STAT "), 0) << settings.substr(pos);
  EXPECT_GE(lines, 5u);
  // Extra arguments are ignored, as memcached does; other reports are not served.
  EXPECT_EQ(h.Feed("stats items x\r\n").substr(0, 22), "STAT items:1:number 2\r");
  EXPECT_EQ(h.Feed("stats sizes\r\nstats cachedump 1 1\r\n"), "ERROR\r\nERROR\r\n");
}

TEST(Memcache, PipelinedReadsStopAtTheReplyBudget) {
  Mc h;
  const std::string v(400'000, 'v');
  ASSERT_EQ(h.Feed("set big 0 0 400000\r\n" + v + "\r\n"), "STORED\r\n");
  std::string gets;
  for (int i = 0; i < 5; ++i) gets += "get big\r\n";
  std::string out;
  const size_t used = h.protocol.Consume(gets, &out);
  // Each reply is "VALUE big 0 400000\r\n" data "\r\nEND\r\n": three pass
  // 1 MiB, and the other two requests wait for the next call.
  EXPECT_EQ(used, 3 * 9u);
  EXPECT_EQ(out.size(), 3 * (v.size() + 27));
  EXPECT_EQ(h.Feed(gets).size(), 5 * (v.size() + 27));
}

TEST(Memcache, HugeMultiGetIsRefused) {
  Mc h;
  const std::string v(1'000'000, 'v');
  ASSERT_EQ(h.Feed("set big 0 0 1000000\r\n" + v + "\r\n"), "STORED\r\n");
  std::string get = "get";
  for (int i = 0; i < 70; ++i) get += " big";  // 70 MB of reply
  EXPECT_EQ(h.Feed(get + "\r\nget nope\r\n"),
            "SERVER_ERROR out of memory writing get response\r\nEND\r\n");
}

TEST(Memcache, ControlCharacterInKeyIsRefused) {
  Mc h;
  EXPECT_EQ(h.Feed(std::string("get a\x01z\r\n")), "CLIENT_ERROR bad command line format\r\n");
}

TEST(Memcache, LineTooLongClosesTheConnection) {
  Mc h;
  EXPECT_EQ(h.Feed(std::string(kMaxLineBytes, 'g')), "");  // may still end in time
  EXPECT_EQ(h.Feed("g"), "CLIENT_ERROR line too long\r\n");
  EXPECT_TRUE(h.protocol.close_requested());
  EXPECT_EQ(h.Feed("get a\r\n"), "");  // nothing runs after it
  EXPECT_EQ(h.pending(), 0u);
}

TEST(Memcache, QuitClosesAndRunsNothingAfter) {
  ExpectScript("set a 0 0 1\r\nx\r\nquit\r\nget a\r\n", "STORED\r\n", true);
}

TEST(Memcache, VersionVerbosityStats) {
  Mc h;
  EXPECT_EQ(h.Feed("version\r\nverbosity 1\r\n"),
            "VERSION " PMINDEX_VERSION_STRING "\r\nOK\r\n");
  EXPECT_EQ(h.Feed("set a 0 0 1\r\nx\r\nget a b\r\n"), "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  const std::string stats = h.Feed("stats\r\n");
  EXPECT_NE(stats.find("STAT curr_items 1\r\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("STAT get_hits 1\r\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("STAT get_misses 1\r\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("STAT cmd_set 1\r\n"), std::string::npos) << stats;
  EXPECT_EQ(stats.substr(stats.size() - 5), "END\r\n");
}

TEST(Memcache, ExptimeConversion) {
  const int64_t now = kStartMs;
  EXPECT_EQ(MemcachedExpiry(0, now), 0);
  EXPECT_EQ(MemcachedExpiry(-1, now), 1);
  EXPECT_EQ(MemcachedExpiry(1, now), now + 1000);
  EXPECT_EQ(MemcachedExpiry(2592000, now), now + 2592000'000);  // 30 days: still relative
  EXPECT_EQ(MemcachedExpiry(2592001, now), 2592001'000);        // beyond: a unix time
  EXPECT_GT(MemcachedExpiry(INT64_MAX, now), now);              // no overflow
}

TEST(ItemCodec, RoundTripsAndRefusesForeignBytes) {
  for (uint32_t flags : {0u, 1u, 0xffffffffu}) {
    for (int64_t expiry : {int64_t{0}, int64_t{1}, kStartMs, INT64_MAX}) {
      std::string enc;
      item_codec::Encode(std::string("d\0ta", 4), flags, expiry, &enc);
      Item item;
      ASSERT_TRUE(item_codec::Decode(enc, &item));
      EXPECT_EQ(item.data, std::string("d\0ta", 4));
      EXPECT_EQ(item.flags, flags);
      EXPECT_EQ(item.expiry_ms, expiry);
      EXPECT_LE(enc.size(), 4 + item_codec::kMaxHeaderBytes);
    }
  }
  Item item;
  EXPECT_FALSE(item_codec::Decode("", &item));
  EXPECT_FALSE(item_codec::Decode("plain value", &item));
  EXPECT_FALSE(item_codec::Decode(std::string("\x51\x01\x02", 3), &item));  // flags cut short
  EXPECT_FALSE(item_codec::Decode(std::string("\x52", 1) + std::string(8, '\0'), &item));
}

TEST(Memcache, ForeignValueInTheStoreIsAServerError) {
  Mc h;
  PMINDEX_ASSERT_OK(h.store.Put("raw", "not an item"));
  const std::string r = h.Feed("get raw\r\n");
  EXPECT_EQ(r.rfind("SERVER_ERROR ", 0), 0u) << r;
}

}  // namespace
}  // namespace pmindex::server::testing
