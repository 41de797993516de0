"""The answer-field formats: countdown's "target|numbers", search's "answer|facts" and the chain the facts spell."""
from workbench.text.answers import chain, countdown_answer, search_answer


def test_countdown_answer_is_the_target_then_the_numbers():
    assert countdown_answer("22|3 5 7") == (22, [3, 5, 7])
    assert countdown_answer("0|1 1") == (0, [1, 1])


def test_search_answer_and_the_chain_it_spells():
    value, facts = search_answer("Zar|Mip>Kel,Bov>Kel,Kel>Zar,Dut>Lon,Lon>Zar")
    assert value == "Zar" and facts[:3] == [("Mip", "Kel"), ("Bov", "Kel"), ("Kel", "Zar")]
    assert chain(facts, "Bov") == ["Bov", "Kel", "Zar"] and chain(facts, "Zar") == ["Zar"]
    assert chain(facts, "Dut")[-1] == value
