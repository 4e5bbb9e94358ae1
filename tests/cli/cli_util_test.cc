// NameFlags (tools/cli_util.h): the library's option names in a message read
// as the command line's flags, where the message states a rule of the
// option, and nowhere else.
#include "tools/cli_util.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hedgedb {
namespace cli {
namespace {

const std::map<std::string, std::string> kFlags = {{"out", "--out"},
                                                   {"lr", "--lr"},
                                                   {"backbone", "--backbone"},
                                                   {"components", "--components"},
                                                   {"dim", "--dim"},
                                                   {"code_dims", "--code-dim"},
                                                   {"conformal_fraction", "--conformal-fraction"}};

TEST(NameFlagsTest, OptionsStatedAsRulesReadAsFlags) {
  EXPECT_EQ(NameFlags("lr must be > 0", kFlags), "--lr must be > 0");
  EXPECT_EQ(NameFlags("out (the output model path) is required", kFlags),
            "--out (the output model path) is required");
  EXPECT_EQ(NameFlags("components > 1 (mixtures) needs method hib", kFlags),
            "--components > 1 (mixtures) needs method hib");
  EXPECT_EQ(NameFlags("dimco takes code_dims and code_k, not dim", kFlags),
            "dimco takes --code-dim and code_k, not --dim");
  EXPECT_EQ(NameFlags("calibrate with a conformal fraction (conformal_fraction) first", kFlags),
            "calibrate with a conformal fraction (--conformal-fraction) first");
}

TEST(NameFlagsTest, ProseWordsStayWords) {
  // The same words in prose, and inside paths and quoted values.
  for (const std::string text :
       {"header length out of range", "TorchScript backbone '/m.pt' does not exist",
        "cars_annos.mat: out of memory", "/tmp/out/m.hdbm is not a model", "got 'lr'"}) {
    EXPECT_EQ(NameFlags(text, kFlags), text);
  }
}

}  // namespace
}  // namespace cli
}  // namespace hedgedb
