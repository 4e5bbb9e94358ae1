// NameFlags (tools/cli_util.h): the library's option names in a message read
// as the command line's flags, where the message states a rule of the
// option or gives it a value, and nowhere else; WithFlags: the library's
// own messages as every command prints them.
#include "tools/cli_util.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

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

TEST(NameFlagsTest, OptionsGivenAValueReadAsFlags) {
  const std::map<std::string, std::string> flags = {{"fit resize", "--fit resize"},
                                                    {"fit crop", "--fit crop"},
                                                    {"source cub", "--data cub"},
                                                    {"layout hib-scaled", "--layout hib-scaled"}};
  const std::pair<std::string, std::string> named[] = {
      {"x.png: 6 x 6 (fit resize or crop converts it)",
       "x.png: 6 x 6 (--fit resize or crop converts it)"},
      {"fit resize or fit crop fits images", "--fit resize or --fit crop fits images"},
      {"source cub:ROOT needs a directory", "--data cub:ROOT needs a directory"},
      {"label 5: layout hib-scaled keeps", "label 5: --layout hib-scaled keeps"},
      // Only the pair: the word alone, another value, a longer word, a path.
      {"images that fit", "images that fit"},
      {"fit exact", "fit exact"},
      {"the fit resizes", "the fit resizes"},
      {"/data/fit resize", "/data/fit resize"},
      {"fit resize.png", "fit resize.png"},
      {"source cubs", "source cubs"},
      {"the source and the model", "the source and the model"}};
  for (const auto& [message, with_flags] : named) EXPECT_EQ(NameFlags(message, flags), with_flags);
}

TEST(WithFlagsTest, TheLibrarysMessagesNameTheCommandsFlags) {
  // The datasets library's messages (datasets/*.cc) as every command prints them.
  const std::pair<std::string, std::string> cases[] = {
      {"val_fraction must be in [0, 1)", "--val-fraction must be in [0, 1)"},
      {"composite_layout must be reference, hib or hib-scaled, got 'x'",
       "--composite-layout must be reference, hib or hib-scaled, got 'x'"},
      {"image_size must be in [8, 1024], got 4", "--image-size must be in [8, 1024], got 4"},
      {"bbox needs annotated boxes; an image folder has none",
       "--bbox needs annotated boxes; an image folder has none"},
      {"class_split applies to cub:ROOT, cars:ROOT and folder:ROOT data only, not 'mnist'",
       "--class-split applies to cub:ROOT, cars:ROOT and folder:ROOT data only, not 'mnist'"},
      {"source features:FEATS.npy,LABELS.npy needs two files, got 'a.npy'",
       "--data features:FEATS.npy,LABELS.npy needs two files, got 'a.npy'"},
      {"source idx:DIR needs a directory", "--data idx:DIR needs a directory"},
      {"class_split must be in [1, 199] (0: the official 100), got 200",
       "--class-split must be in [1, 199] (0: the official 100), got 200"},
      {"classes 1-4: for a subset, class_split K trains on classes 1..K",
       "classes 1-4: for a subset, --class-split K trains on classes 1..K"},
      {"composites (train): 70 classes of 1428 items (1400 + 28 validation) need 1428 distinct "
       "base images: ask for fewer (train_total, test_total), or fewer positions (num_positions)",
       "composites (train): 70 classes of 1428 items (1400 + 28 validation) need 1428 distinct "
       "base images: ask for fewer (--train-total, --test-total), or fewer positions (--items)"},
      {"the HIB Table 3 layout is defined for N = 2 and 3: use layout reference (the reference "
       "generator's rule)",
       "the HIB Table 3 layout is defined for N = 2 and 3: use --composite-layout reference (the "
       "reference generator's rule)"},
      {"label 0: layout hib-scaled keeps Table 3's 70 classes with fewer items per class, or ask "
       "for fewer (test_total)",
       "label 0: --composite-layout hib-scaled keeps Table 3's 70 classes with fewer items per "
       "class, or ask for fewer (--test-total)"},
      {"a.png: the image is 6 x 6 with 1 channel but the model takes 12 x 12 with 1 channel (fit "
       "resize or crop converts it) (2 of 2 images cannot be used; nothing was ingested; no image "
       "can be used as it is: fit resize or fit crop fits images of other sizes to the model)",
       "a.png: the image is 6 x 6 with 1 channel but the model takes 12 x 12 with 1 channel "
       "(--fit resize or crop converts it) (2 of 2 images cannot be used; nothing was ingested; "
       "no image can be used as it is: --fit resize or --fit crop fits images of other sizes to "
       "the model)"},
      {"b.png: truncated (1 of 9 images cannot be used; nothing was ingested; skipping bad images "
       "(skip_bad_images) ingests the others)",
       "b.png: truncated (1 of 9 images cannot be used; nothing was ingested; skipping bad images "
       "(--on-error skip) ingests the others)"},
      {"nothing was ingested (existing skip ingests only the new ones, existing add adds them "
       "again)",
       "nothing was ingested (--existing skip ingests only the new ones, --existing add adds them "
       "again)"},
      // Prose stays prose.
      {"no image can be used: check the source and the model",
       "no image can be used: check the source and the model"},
  };
  for (const auto& [library, command] : cases) EXPECT_EQ(WithFlags(library), command);
}

}  // namespace
}  // namespace cli
}  // namespace hedgedb
