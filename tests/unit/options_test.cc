// Options parsing and every error message; registry and create_index checks
// that need no pool.
#include "index/options.h"

#include <gtest/gtest.h>

#include "index/index.h"
#include "index/registry.h"
#include "support/kinds.h"

namespace pmindex {
namespace {

Options MustParse(std::string_view text) {
  auto r = Options::Parse(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? r.value() : Options();
}

std::string ParseError(std::string_view text) {
  auto r = Options::Parse(text);
  EXPECT_FALSE(r.ok()) << text;
  return std::string(r.status().message());
}

TEST(OptionsTest, ParsesInOrder) {
  Options o = MustParse("node=512, fill=0.7,adaptive=balanced");
  ASSERT_EQ(o.items().size(), 3u);
  EXPECT_EQ(o.items()[0].first, "node");
  EXPECT_EQ(o.get("fill"), "0.7");
  EXPECT_TRUE(o.has("adaptive"));
  EXPECT_FALSE(o.has("nod"));
  EXPECT_EQ(o.get("missing", "dflt"), "dflt");
  EXPECT_EQ(o.ToString(), "node=512,fill=0.7,adaptive=balanced");
}

TEST(OptionsTest, EmptyTextIsNoOptions) {
  EXPECT_TRUE(MustParse("").items().empty());
  EXPECT_TRUE(MustParse("  ").items().empty());
  EXPECT_EQ(MustParse("").ToString(), "");
}

TEST(OptionsTest, MalformedText) {
  EXPECT_EQ(ParseError("node"), "option \"node\" has no value (expected key=value)");
  EXPECT_EQ(ParseError("=5"), "option \"=5\" has an empty name");
  EXPECT_EQ(ParseError("node="), "option node has an empty value");
  EXPECT_EQ(ParseError("node=1,node=2"), "option node is given twice");
  EXPECT_EQ(ParseError("node=1,,fill=1"),
            "options \"node=1,,fill=1\": empty item (expected key=value,key=value)");
  EXPECT_EQ(ParseError("node=1,"),
            "options \"node=1,\": empty item (expected key=value,key=value)");
  auto r = Options::Parse("node");
  EXPECT_TRUE(r.status().is_invalid_argument());
}

TEST(OptionsTest, Uint) {
  Options o = MustParse("node=256,bad=abc,neg=-1,big=99999999999999999999,mix=12x");
  EXPECT_EQ(o.get_uint("node", 1).value(), 256u);
  EXPECT_EQ(o.get_uint("absent", 77).value(), 77u);
  EXPECT_EQ(o.get_uint("bad", 1).status().message(), "option bad: \"abc\" is not a number");
  EXPECT_EQ(o.get_uint("neg", 1).status().message(), "option neg: \"-1\" is not a number");
  EXPECT_EQ(o.get_uint("mix", 1).status().message(), "option mix: \"12x\" is not a number");
  EXPECT_EQ(o.get_uint("big", 1).status().message(),
            "option big: \"99999999999999999999\" is too large");
  EXPECT_EQ(o.get_uint("node", 1, 16, 128).status().message(),
            "option node: 256 is outside [16, 128]");
  EXPECT_TRUE(o.get_uint("node", 1, 256, 256).ok());
  EXPECT_TRUE(o.get_uint("bad", 1).status().is_invalid_argument());
}

TEST(OptionsTest, Double) {
  Options o = MustParse("fill=0.7,high=1.5,low=0.25,text=abc,inf=inf,nan=nan,one=1");
  EXPECT_DOUBLE_EQ(o.get_double("fill", 1, 0.5, 1).value(), 0.7);
  EXPECT_DOUBLE_EQ(o.get_double("absent", 0.9, 0.5, 1).value(), 0.9);
  EXPECT_DOUBLE_EQ(o.get_double("one", 0.9, 0.5, 1).value(), 1.0);
  EXPECT_EQ(o.get_double("high", 1, 0.5, 1).status().message(),
            "option high: 1.5 is outside [0.5, 1]");
  EXPECT_EQ(o.get_double("low", 1, 0.5, 1).status().message(),
            "option low: 0.25 is outside [0.5, 1]");
  EXPECT_EQ(o.get_double("text", 1, 0, 1).status().message(),
            "option text: \"abc\" is not a number");
  EXPECT_EQ(o.get_double("inf", 1, 0, 1).status().message(),
            "option inf: \"inf\" is not a number");
  EXPECT_EQ(o.get_double("nan", 1, 0, 1).status().message(),
            "option nan: \"nan\" is not a number");
}

TEST(OptionsTest, Bool) {
  Options o = MustParse("a=true,b=0,c=yes,d=off,e=maybe");
  EXPECT_TRUE(o.get_bool("a", false).value());
  EXPECT_FALSE(o.get_bool("b", true).value());
  EXPECT_TRUE(o.get_bool("c", false).value());
  EXPECT_FALSE(o.get_bool("d", true).value());
  EXPECT_TRUE(o.get_bool("absent", true).value());
  EXPECT_EQ(o.get_bool("e", true).status().message(),
            "option e: \"maybe\" is not a boolean (true|false|1|0|yes|no|on|off)");
}

TEST(OptionsTest, Enum) {
  Options o = MustParse("adaptive=balanced,mode=fast");
  EXPECT_EQ(o.get_enum("adaptive", "off", {"off", "balanced", "aggressive"}).value(), "balanced");
  EXPECT_EQ(o.get_enum("absent", "off", {"off", "on"}).value(), "off");
  EXPECT_EQ(o.get_enum("mode", "slow", {"slow", "safe"}).status().message(),
            "option mode: \"fast\" is not one of slow|safe");
}

TEST(OptionsTest, CheckKnown) {
  Options o = MustParse("nod=5");
  EXPECT_EQ(o.CheckKnown({"node", "fill"}).message(),
            "unknown option \"nod\" (accepted: node, fill)");
  EXPECT_EQ(o.CheckKnown({}).message(), "unknown option \"nod\" (accepted: none)");
  EXPECT_TRUE(MustParse("node=5,fill=1").CheckKnown({"node", "fill"}).ok());
  EXPECT_TRUE(MustParse("").CheckKnown({}).ok());
}

TEST(OptionsTest, SetReplacesOrAppends) {
  Options o = MustParse("node=5");
  o.set("fill", "0.5");
  o.set("node", "7");
  EXPECT_EQ(o.ToString(), "node=7,fill=0.5");
  EXPECT_EQ(MustParse(o.ToString()).ToString(), o.ToString());
}

TEST(RegistryTest, SortedAndFindable) {
  auto all = Registry::Get().All();
  ASSERT_GE(all.size(), 2u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1]->name, all[i]->name);
  const IndexInfo* d = Registry::Get().Find("dram-btree");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->persistent);
  const IndexInfo* n = Registry::Get().Find("null");
  ASSERT_NE(n, nullptr);
  EXPECT_FALSE(n->stores_data);
  EXPECT_EQ(Registry::Get().Find("no-such-index"), nullptr);
}

// The tests' table (support/kinds.h) and the library's registry agree: every
// registered kind but the fixtures has test configs, each accepted by the
// kind's validator, so the scenarios, pmcrash's `all` and the fuzzer run
// it; and every entry names a kind this build registers.
TEST(KindTableTest, EveryRegisteredKindHasValidTestConfigs) {
  const testing::TestKinds& kinds = testing::TestKinds::Get();
  size_t persistent = 0;
  for (const IndexInfo* info : kinds.NonFixtures()) {
    const testing::KindTests* t = kinds.Find(info->name);
    ASSERT_NE(t, nullptr) << "index kind \"" << info->name
                          << "\" has no test configs in tests/support/kinds.h";
    ASSERT_FALSE(t->configs.empty()) << info->name;
    for (const std::string& c : t->configs) {
      auto opts = Options::Parse(c);
      ASSERT_TRUE(opts.ok()) << info->name << " \"" << c << "\": " << opts.status().ToString();
      Status s = info->validate ? info->validate(opts.value()) : opts.value().CheckKnown({});
      EXPECT_TRUE(s.ok()) << info->name << " \"" << c << "\": " << s.ToString();
    }
    if (info->persistent) ++persistent;
  }
  EXPECT_GE(persistent, 10u);
  for (const testing::KindTests& t : testing::BuiltinKindTests()) {
    if (t.kind == "absl-btree") continue;  // built only where Abseil is installed
    EXPECT_NE(Registry::Get().Find(t.kind), nullptr) << t.kind << " is not registered";
    EXPECT_FALSE(kinds.IsFixture(t.kind)) << t.kind;
  }
}

// The probe kinds of this binary (index_open_test, abandoned_open_test) are
// fixtures: registered, openable, and left out of the per-kind lists.
TEST(KindTableTest, FixturesAreRegisteredButNotListed) {
  const testing::TestKinds& kinds = testing::TestKinds::Get();
  ASSERT_NE(Registry::Get().Find("probe-open"), nullptr);
  EXPECT_TRUE(kinds.IsFixture("probe-open"));
  for (const IndexInfo* info : kinds.NonFixtures()) EXPECT_NE(info->name, "probe-open");
}

TEST(RegistryDeathTest, DuplicateNameAborts) {
  EXPECT_DEATH(
      [] {
        IndexInfo dup;
        dup.name = "null";
        dup.create = [](const IndexEnv&, const Options&) -> Result<std::unique_ptr<Index>> {
          return Status::NotSupported();
        };
        Registry::Get().Add(std::move(dup));
      }(),
      "index kind \"null\" is registered twice");
}

TEST(CreateIndexTest, UnknownKindListsKnownKinds) {
  auto r = create_index("lbtre", "", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_invalid_argument());
  std::string m(r.status().message());
  EXPECT_EQ(m.rfind("unknown index kind \"lbtre\" (known: ", 0), 0u) << m;
  EXPECT_NE(m.find("dram-btree"), std::string::npos) << m;
}

TEST(CreateIndexTest, BadOptions) {
  auto r = create_index("dram-btree", "nod=16", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unknown option \"nod\" (accepted: node)");
  r = create_index("dram-btree", "node=17", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "option node: \"17\" is not one of 4|14|16|30|32|62|64|128");
  r = create_index("null", "node=16", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unknown option \"node\" (accepted: none)");
  r = create_index("dram-btree", "node", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_invalid_argument());
}

TEST(CreateIndexTest, VolatileKinds) {
  for (const char* opts : {"", "node=4", "node=16", "node=128"}) {
    auto r = create_index("dram-btree", opts, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    Index& idx = *r.value();
    EXPECT_EQ(idx.kind(), "dram-btree");
    EXPECT_FALSE(idx.persistent());
    EXPECT_EQ(idx.allocator(), nullptr);
    EXPECT_TRUE(idx.insert(5, 50).ok());
    EXPECT_TRUE(idx.insert(5, 51).is_already_exists());
    EXPECT_TRUE(idx.update(6, 1).is_not_found());
    EXPECT_EQ(*idx.lookup(5), 50u);
    EXPECT_TRUE(idx.for_each_block([](PPtr) {}).is_not_supported());
    EXPECT_TRUE(idx.bulk_load({}, 0.7).is_invalid_argument());  // not empty
    EXPECT_TRUE(idx.remove(5).ok());
    EXPECT_TRUE(idx.remove(5).is_not_found());
    EXPECT_TRUE(idx.bulk_load({}, 1.5).is_invalid_argument());
    std::vector<KV> unsorted = {{2, 0}, {1, 0}};
    EXPECT_TRUE(idx.bulk_load(unsorted, 1).is_invalid_argument());
    EXPECT_TRUE(idx.verify().ok());
    EXPECT_TRUE(idx.close().ok());
  }
  auto n = create_index("null", "", nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n.value()->insert(1, 1).ok());
  EXPECT_FALSE(n.value()->lookup(1).has_value());
  EXPECT_EQ(n.value()->stats().entries, 0u);
}

TEST(CreateIndexTest, VolatileKindRefusesPoolAndPoolFile) {
  auto pool = Pool::CreateInMemory(PoolOptions{});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto r = create_index("dram-btree", "", pool.value().get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "index kind \"dram-btree\" is volatile and takes no pool");
  auto p = create_pool_for("dram-btree", "", "/tmp/never-created.pool", PoolOptions{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "index kind \"dram-btree\" is volatile and has no pool");
  p = create_pool_for("no-such", "", "/tmp/never-created.pool", PoolOptions{});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(p.status().is_invalid_argument());
  auto o = open_index(nullptr);
  EXPECT_TRUE(o.status().is_invalid_argument());
}

TEST(CreateIndexTest, DramBTreeStats) {
  auto r = create_index("dram-btree", "node=16", nullptr);
  ASSERT_TRUE(r.ok());
  Index& idx = *r.value();
  EXPECT_EQ(idx.stats().height, 0u);
  std::vector<KV> kv;
  for (uint64_t k = 0; k < 1000; ++k) kv.push_back({k * 2, k});
  ASSERT_TRUE(idx.bulk_load(kv, 1.0).ok());
  IndexStats s = idx.stats();
  EXPECT_EQ(s.entries, 1000u);
  EXPECT_EQ(s.leaves, (1000u + 15) / 16);
  EXPECT_GE(s.height, 3u);
  EXPECT_GT(s.dram_bytes, 1000u * 16);
  EXPECT_EQ(s.pm_bytes, 0u);
  KV out[4];
  ASSERT_EQ(idx.scan(5, 4, out), 4u);
  EXPECT_EQ(out[0].key, 6u);
}

}  // namespace
}  // namespace pmindex
