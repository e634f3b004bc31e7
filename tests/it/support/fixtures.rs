//! Repositories and plans that tests in more than one file run.

use super::TestRepo;

/// core breaks the merged checks in its first round and mends them when sent back; a and
/// b copy its file, z theirs: whatever they started from shows in their work.
pub const CULPRIT_WAVES: &str = "goal = \"waves\"\n\
     [checks]\nmerged = [\"! grep -q broken src/a.txt src/b.txt src/z.txt src/core.txt\"]\nrework = 1\n\
     [[task]]\nid = \"core\"\nprompt = \"p\"\nowns = [\"/src/core.txt\"]\n\
     agent = { exec = \"if [ -n \\\"$PLAIT_FEEDBACK\\\" ]; then echo fixed > src/core.txt; else echo broken > src/core.txt; fi\" }\n\
     [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/a.txt\"]\nafter = [\"core\"]\nagent = { exec = \"cp src/core.txt src/a.txt\" }\n\
     [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/src/b.txt\"]\nafter = [\"core\"]\nagent = { exec = \"cp src/core.txt src/b.txt\" }\n\
     [[task]]\nid = \"z\"\nprompt = \"p\"\nowns = [\"/src/z.txt\"]\nafter = [\"a\", \"b\"]\nagent = { exec = \"cat src/a.txt src/b.txt > src/z.txt\" }\n";

pub fn culprit_waves_repo() -> TestRepo {
    TestRepo::with_files(&[
        ("src/core.txt", "core\n"),
        ("src/a.txt", "a\n"),
        ("src/b.txt", "b\n"),
        ("src/z.txt", "z\n"),
    ])
}
