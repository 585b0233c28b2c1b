"""Pools of realistic values, drawn once per seed with Faker, then picked by row index.

Rows are derived from (seed, index) with numpy, and their text fields picked from these pools,
so a million rows cost a few arrays rather than a million Faker calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from faker import Faker

LOCALES = ("en_US", "ja_JP", "zh_TW", "es_ES", "fr_FR", "pt_BR", "th_TH")

# Comments people leave under posts, in the languages the brands' audiences write in; most
# carry one of the demo keywords so activities have something to match.
COMMENT_TEXTS = (
    "price please!",
    "How much is this? 😍",
    "link pls",
    "info",
    "I want one!!",
    "Where can I buy this?",
    "Is this available in blue?",
    "DM me the details",
    "いくらですか？",
    "リンクください",
    "欲しいです！",
    "在哪裡買？",
    "多少錢？",
    "想要 +1",
    "¿Cuánto cuesta?",
    "info por favor",
    "Quiero uno 🙌",
    "C'est combien ?",
    "lien svp",
    "Quanto custa?",
    "quero!",
    "ราคาเท่าไหร่คะ",
    "สนใจค่ะ",
    "love this 🔥",
    "giveaway",
    "when is the next drop?",
)

MESSAGE_TEXTS = (
    "Hi, is my order shipped yet?",
    "Can I change my delivery address?",
    "Thanks for the quick reply!",
    "Do you have this in size M?",
    "注文の確認をお願いします",
    "ありがとうございます",
    "請問還有貨嗎？",
    "謝謝！",
    "¿Hacen envíos a Chile?",
    "Merci beaucoup !",
    "Olá, preciso de ajuda com meu pedido",
    "ขอบคุณค่ะ",
    "I'd like to return an item",
    "What time do you open tomorrow?",
    "Your order #{n} has been confirmed.",
    "Our agent will reply shortly.",
)


@dataclass(frozen=True)
class Pools:
    names: tuple[str, ...]
    usernames: tuple[str, ...]
    emails: tuple[str, ...]
    mobiles: tuple[str, ...]  # E.164
    cities: tuple[str, ...]
    companies: tuple[str, ...]
    addresses: tuple[str, ...]
    countries: tuple[str, ...]  # ISO 3166 alpha-2, lower case as the conversation samples show


@lru_cache(maxsize=8)
def pools(seed: int, size: int = 3000) -> Pools:
    """The same seed gives the same pools, on any machine."""
    fakers = [Faker(locale) for locale in LOCALES]
    for offset, faker in enumerate(fakers):
        faker.seed_instance(seed * 1009 + offset)
    names, usernames, emails, mobiles, cities, companies, addresses, countries = (
        [] for _ in range(8)
    )
    latin = Faker("en_US")
    latin.seed_instance(seed)
    for i in range(size):
        faker = fakers[i % len(fakers)]
        names.append(faker.name())
        handle = latin.user_name()
        usernames.append(f"{handle}{i % 97}")
        emails.append(f"{handle}.{i}@{latin.free_email_domain()}")
        mobiles.append(
            f"+{latin.random_element((1, 44, 81, 886, 34, 33, 55, 66))}"
            f"{latin.numerify('#########')}"
        )
        cities.append(faker.city())
        companies.append(faker.company())
        addresses.append(faker.address().replace("\n", ", "))
        countries.append(latin.country_code().lower())
    return Pools(
        *(
            tuple(p)
            for p in (names, usernames, emails, mobiles, cities, companies, addresses, countries)
        )
    )
