"""``Model.fit``'s overrides: three spellings, one nested dict."""

from __future__ import annotations

import pytest

from lucidyolo.api.overrides import dotted_key, nest_overrides
from lucidyolo.errors import ConfigError


def test_the_three_spellings_nest_alike_and_merge():
    assert nest_overrides({"trainer": {"max_epochs": 2}}) == {"trainer": {"max_epochs": 2}}
    assert nest_overrides({"trainer__max_epochs": 2}) == {"trainer": {"max_epochs": 2}}
    assert nest_overrides({"trainer.max_epochs": 2}) == {"trainer": {"max_epochs": 2}}
    mixed = nest_overrides({"trainer": {"max_epochs": 2, "limit_train_batches": 4}, "trainer__max_epochs": 3,
                            "data.augment.hsv_h": 0.0, "model": {"freeze": "backbone"}, "seed": 7})
    assert mixed == {"trainer": {"max_epochs": 3, "limit_train_batches": 4}, "data": {"augment": {"hsv_h": 0.0}},
                     "model": {"freeze": "backbone"}, "seed": 7}


def test_later_layers_win_and_nested_keys_may_be_spelled_either_way():
    assert nest_overrides({"data": {"batch_size": 4}}, {"data__batch_size": 8}) == {"data": {"batch_size": 8}}
    assert nest_overrides({"data": {"augment__hsv_h": 0.1}}) == {"data": {"augment": {"hsv_h": 0.1}}}
    assert nest_overrides({"model": {"weights": None}}) == {"model": {"weights": None}}


@pytest.mark.parametrize("key", ["", "trainer.", "__max_epochs", "trainer..max_epochs", "trainer____x"])
def test_a_malformed_key_is_a_config_error(key):
    with pytest.raises(ConfigError, match="malformed") as err:
        dotted_key(key)
    assert err.value.exit_code == 2 and err.value.fix


def test_a_value_under_a_plain_value_is_refused():
    with pytest.raises(ConfigError, match="not a section"):
        nest_overrides({"seed": 1, "seed.x": 2})
