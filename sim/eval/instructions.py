"""The 33 Mobile-Eval instructions, worded as published.

Source: Table 1 of "Mobile-Agent: Autonomous Multi-Modal Mobile Device Agent with Visual
Perception" (Wang et al. 2024, arXiv 2401.16158), cross-checked against the Mobile-Eval
table in the X-PLUG/MobileAgent README. Curly quotes are written as ASCII quotes.

Where the two sources differ, or the text has a typo:
- Alibaba.com 2: the first README had "avaliable"; the paper and the later README say
  "available", which we use.
- Gmail 1: "Send an empty email to to {address}." keeps the doubled "to" as published:
  it does not change the meaning.
- Gmail 2: one README revision has "{address}n"; the paper has "{address}", which we use.
- TikTok 3: "3 pet video cat" is kept as published; its meaning (three pet-cat videos) is
  clear.
- Multi-App 1: the published "Today is [today's data]" is a typo that changes what the
  note must say; we write "Today is {today's date}" (a placeholder the agent fills in).
- Placeholders: ``{address}`` is filled from the task's parameters (an e-mail address per
  seed). ``{today's date}`` stays in the text: the agent must read the date off Calendar.

``PAPER_HUMAN_STEPS`` is the human step count the paper reports in Table 2 (the second
number of each RE cell), kept for comparison with our reference solutions' lengths.
"""

from __future__ import annotations

# (app row, tier) -> instruction; tier 1 = simple, 2 = added requirements, 3 = abstract.
INSTRUCTIONS: dict[tuple[str, int], str] = {
    ("Alibaba.com", 1): "Help me find caps in Alibaba.com.",
    ("Alibaba.com", 2): (
        'Help me find caps in Alibaba.com. If the "Add to cart" is available in the item '
        "information page, please add the item to my cart."
    ),
    ("Alibaba.com", 3): (
        "I want to buy a cap. I've heard things are cheap on Alibaba.com. "
        "Maybe you can find it for me."
    ),
    ("Amazon Music", 1): "Search singer Jay Chou in Amazon Music.",
    ("Amazon Music", 2): 'Search a music about "agent" in Amazon Music and play it.',
    ("Amazon Music", 3): "I want to listen music to relax. Find an App to help me.",
    ("Chrome", 1): "Search result for today's Lakers game.",
    ("Chrome", 2): "Search the information about Taylor Swift.",
    ("Chrome", 3): "I want to know the result for today's Lakers game. Find an App to help me.",
    ("Gmail", 1): "Send an empty email to to {address}.",
    ("Gmail", 2): "Send an email to {address} to tell my new work.",
    ("Gmail", 3): (
        "I want to let my friend know my new work, and his address is {address}. "
        "Find an App to help me."
    ),
    ("Google Maps", 1): "Navigate to Hangzhou West Lake.",
    ("Google Maps", 2): "Navigate to a nearby gas station.",
    ("Google Maps", 3): (
        "I want to go to Hangzhou West Lake, but I don't know the way. Find an App to help me."
    ),
    ("Google Play", 1): "Download WhatsApp in Play Store.",
    ("Google Play", 2): "Download Instagram in Play Store.",
    ("Google Play", 3): "I want WhatsApp on my phone. Find an App to help me.",
    ("Notes", 1): "Create a new note in Notes.",
    ("Notes", 2): 'Create a new note in Notes and write "Hello, this is a note", then save it.',
    ("Notes", 3): (
        "I suddenly have something to record, so help me find an App and write down the "
        "following content: meeting at 3pm."
    ),
    ("Settings", 1): "Turn on the dark mode.",
    ("Settings", 2): "Turn on the airplane mode.",
    ("Settings", 3): (
        "I want to see the real time internet speed at the battery level, please turn on "
        "this setting for me."
    ),
    ("TikTok", 1): 'Swipe a video about pet cat in TikTok and click a "like" for this video.',
    ("TikTok", 2): 'Swipe a video about pet cat in TikTok and comment "Ohhhh, so cute cat!".',
    ("TikTok", 3): 'Swipe videos in TikTok. Click "like" for 3 pet video cat.',
    ("YouTube", 1): "Search for videos about Stephen Curry on YouTube.",
    ("YouTube", 2): (
        'Search for videos about Stephen Curry on YouTube and open "Comments" to comment '
        '"Oh, chef, your basketball spirit has always inspired me".'
    ),
    ("YouTube", 3): "I need you to help me show my love for Stephen Curry on YouTube.",
    ("Multi-App", 1): (
        "Open the calendar and look at today's date, then go to Notes and create a new note "
        "to write \"Today is {today's date}\"."
    ),
    ("Multi-App", 2): (
        "Check the temperature in the next 5 days, and then create a new note in Notes and "
        "write a temperature analysis."
    ),
    ("Multi-App", 3): (
        "Search the result for today's Lakers game, and then create a note in Notes to write "
        "a sport news for this result."
    ),
}

# Tier 4, in the style of Mobile-Eval-E (Wang et al. 2025, arXiv 2501.11733): information
# read in one app is needed in another, or one app's job has several sub-goals. Ours, not
# published: keyed by task name. ``{today's date}`` and the like stay for the agent to read.
LONG_INSTRUCTIONS: dict[str, str] = {
    "weather-note": (
        "Check tomorrow's highest temperature in the Weather app, then create a new note in "
        "Notes that says \"Tomorrow's high: \" followed by that temperature."
    ),
    "calendar-email": (
        "Look up today's date in Calendar, then send an email to {address} with the subject "
        "\"Meeting\" saying that we meet on that date."
    ),
    "youtube-title-chrome": (
        "Open YouTube and look at the first video on its home feed, then search for that "
        "video's title in Chrome."
    ),
    "cheapest-cap-note": (
        "Search for caps on Alibaba.com, find the cheapest one, and write its name and price "
        "in a new note in Notes."
    ),
    "west-lake-distance": (
        "Find out in Maps how far away Hangzhou West Lake is, then write the distance in a "
        "new note in Notes."
    ),
    "whatsapp-rating-email": (
        "Find WhatsApp's rating in the Play Store and email it to {address}."
    ),
    "warmest-day-email": (
        "Find the warmest of the next five days in the Weather app and email {address} which "
        "day it is and its high temperature."
    ),
    "date-weather-note": (
        "Create a new note in Notes that gives today's date from Calendar and today's high "
        "temperature from the Weather app."
    ),
    "two-searches": (
        "On YouTube, search for videos about Stephen Curry; then search for lofi music "
        "instead and like the lo-fi video you find."
    ),
    "dark-and-airplane": (
        "In Settings, turn on the dark mode and then the airplane mode."
    ),
}

APP_ROWS: tuple[str, ...] = (
    "Alibaba.com", "Amazon Music", "Chrome", "Gmail", "Google Maps", "Google Play",
    "Notes", "Settings", "TikTok", "YouTube", "Multi-App",
)

# Table 2 of the paper: the human's step count per (app row, tier).
PAPER_HUMAN_STEPS: dict[tuple[str, int], int] = {
    ("Alibaba.com", 1): 3, ("Alibaba.com", 2): 8, ("Alibaba.com", 3): 9,
    ("Amazon Music", 1): 5, ("Amazon Music", 2): 6, ("Amazon Music", 3): 3,
    ("Chrome", 1): 4, ("Chrome", 2): 4, ("Chrome", 3): 5,
    ("Gmail", 1): 4, ("Gmail", 2): 8, ("Gmail", 3): 8,
    ("Google Maps", 1): 5, ("Google Maps", 2): 6, ("Google Maps", 3): 6,
    ("Google Play", 1): 3, ("Google Play", 2): 4, ("Google Play", 3): 3,
    ("Notes", 1): 4, ("Notes", 2): 4, ("Notes", 3): 5,
    ("Settings", 1): 4, ("Settings", 2): 4, ("Settings", 3): 5,
    ("TikTok", 1): 4, ("TikTok", 2): 10, ("TikTok", 3): 7,
    ("YouTube", 1): 4, ("YouTube", 2): 9, ("YouTube", 3): 7,
    ("Multi-App", 1): 6, ("Multi-App", 2): 6, ("Multi-App", 3): 10,
}


def long_instruction(name: str, **params: str) -> str:
    """A tier-4 instruction by name, placeholders filled."""
    try:
        text = LONG_INSTRUCTIONS[name]
    except KeyError:
        raise KeyError(f"no tier-4 instruction named {name!r}") from None
    for key, value in params.items():
        text = text.replace("{" + key + "}", value)
    return text


def instruction(app: str, tier: int, **params: str) -> str:
    """The published instruction with its ``{name}`` placeholders filled from params."""
    try:
        text = INSTRUCTIONS[(app, tier)]
    except KeyError:
        raise KeyError(f"no Mobile-Eval instruction for app {app!r} tier {tier}") from None
    for name, value in params.items():
        text = text.replace("{" + name + "}", value)
    return text
