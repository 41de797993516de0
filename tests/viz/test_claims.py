"""The compact claims table: recipe, claim, verdict; the numbers and reasons one click away."""
import re

from workbench.viz.claims import claims_html


def row(verdict, **kw):
    return {"recipe": "a<b", "family": "canonical", "claim": "x & y", "comparison": "f1-countdown", "seen": "",
            "reading": "", "verdict": verdict, **kw}


def test_three_columns_with_the_verdict_as_a_badge_and_its_details_on_demand():
    text = claims_html([row("reproduced", seen="accuracy_after: 0.5 vs grpo 0.4", reading="r < s"),
                        row("not testable here: the toy task has no tags")])
    assert re.findall(r"<th>(.*?)</th>", text) == ["recipe", "claim", "verdict"]
    assert "<code>a&lt;b</code>" in text and "x &amp; y" in text  # escaped
    assert '<span class="workbench-verdict wb-reproduced">reproduced</span><details><summary>the numbers</summary>' \
           "accuracy_after: 0.5 vs grpo 0.4, in <code>f1-countdown</code>. What explains it: r &lt; s</details>" in text
    assert '<span class="workbench-verdict wb-not-testable">not testable here</span><details><summary>why</summary>' \
           "the toy task has no tags</details>" in text
    assert 'data-verdict="not-testable"' in text and "table-layout: fixed" in text


def test_no_worse_keeps_its_words_and_links_are_optional():
    text = claims_html([row("reproduced (no worse)", seen="s")],
                       links=lambda key: ("catalog.html#c", [("n.html#s", "01 › s")]))
    assert ">reproduced (no worse)</span>" in text and '<a href="catalog.html#c" title="catalog card">' in text
    assert '<small><a href="n.html#s">01 › s</a></small>' in text
