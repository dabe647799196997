"""The synthetic corpus: a small, seeded story grammar (like nanoGPT's data/<set>/prepare.py, apart from the
pipeline that tokenizes it, `rev.data.corpus`).

Each story is drawn from its own `random.Random` seeded by (seed, index), so story i is the same whatever the
corpus size, a corpus of n stories is a prefix of one of n+1 stories, and any split can be regenerated alone.
The grammar keeps a cast (hero, friend, grown-up), a place and an object fixed through a story, so a model has
long-range consistency to learn (names, pronouns, what was lost and where), not only local word statistics.
The word tables live in `rev.data.story_words`; this module is the telling.
"""
from __future__ import annotations

import random
from typing import Iterator

from .story_words import (ANIMALS, BOYS, CHILD_HOMES, CHILD_LIKES, FEARS, GIRLS, GROWNUPS, HOUSE_THINGS,
                          INDOOR_FUN, MYSTERIES, OBJECTS, PET_NAMES, PLACES, PRESENTS, SKILLS, SYNONYMS,
                          TRAITS, TREAT_WORDS, TROUBLES, WEATHER)


class _Values(dict):
    """Template values. A key listed in `SYNONYMS` is drawn afresh each time a template uses it."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        if key not in SYNONYMS:
            raise KeyError(key)
        return self.rng.choice(SYNONYMS[key]).format_map(self)


def _capitalise(sentence: str) -> str:
    for i, ch in enumerate(sentence):
        if ch.isalpha():
            return sentence[:i] + ch.upper() + sentence[i + 1:]
    return sentence


class _Teller:
    """Collects sentences into paragraphs; each `say` picks one of its variants."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.v = _Values(rng)
        self.paragraphs: list[str] = []
        self.current: list[str] = []

    def say(self, *variants: str) -> None:
        self.current.append(_capitalise(self.rng.choice(variants).format_map(self.v)))

    def maybe(self, p: float, *variants: str) -> None:
        if self.rng.random() < p:
            self.say(*variants)

    def paragraph(self) -> None:
        if self.current:
            self.paragraphs.append(" ".join(self.current))
            self.current = []

    def text(self) -> str:
        self.paragraph()
        # one newline between paragraphs: a blank line is the story separator of plain-text corpora
        return "\n".join(self.paragraphs)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _pronouns(female: bool, prefix: str = "") -> dict[str, str]:
    words = ({"he": "she", "him": "her", "his": "her", "himself": "herself"} if female else
             {"he": "he", "him": "him", "his": "his", "himself": "himself"})
    out = {prefix + k: v for k, v in words.items()}
    out.update({prefix + k.capitalize(): v.capitalize() for k, v in words.items()})
    return out


def _character(rng: random.Random, avoid: str = "") -> dict[str, str]:
    """A child (names by gender) or a young animal (pet names); never named `avoid`."""
    female = rng.random() < 0.5
    if rng.random() < 0.62:
        kind = "girl" if female else "boy"
        names = GIRLS if female else BOYS
        home, likes = rng.choice(CHILD_HOMES), rng.choice(CHILD_LIKES)
    else:
        kind = rng.choice(tuple(ANIMALS))
        names = PET_NAMES
        home, likes = ANIMALS[kind]
    name = rng.choice(names)
    while name == avoid:
        name = rng.choice(names)
    size = rng.choice(("little ", "little ", "young ", "small ", ""))
    return {"name": name, "kind": kind, "desc": _a(size + kind), "home": home, "likes": likes,
            **_pronouns(female)}


def _cast(t: _Teller, breakable: bool = False) -> None:
    """Fills the teller's values with a hero, a friend, a grown-up, a place and an object."""
    rng, v = t.rng, t.v
    hero = _character(rng)
    v.update(hero)
    friend = _character(rng, avoid=hero["name"])
    v.update({"friend": friend["name"], "fkind": friend["kind"], "fdesc": friend["desc"],
              **_pronouns(friend["he"] == "she", "f")})
    adult, adult_he = rng.choice(GROWNUPS)
    v.update({"adult": adult, "adult_lc": adult.lower(), **_pronouns(adult_he == "she", "a")})
    place = rng.choice(tuple(PLACES))
    where, sights, spots, activities = PLACES[place]
    s = rng.sample(sights, 2)
    p = rng.sample(spots, 3)
    a = rng.sample(activities, 2)
    v.update({"place": place, "at_place": where, "sight1": s[0], "sight2": s[1],
              "spot1": p[0], "spot2": p[1], "spot3": p[2],
              "activity": a[0], "activity2": a[1], "weather": rng.choice(WEATHER)})
    names = [k for k, o in OBJECTS.items() if o[3] is not None] if breakable else list(OBJECTS)
    obj = rng.choice(names)
    adjs, play, played, broke, fix = OBJECTS[obj]
    v.update({"obj": obj, "oadj": rng.choice(adjs), "play": play, "played": played,
              "broke": broke or "", "Broke": _capitalise(broke or ""), "fix": fix or ""})
    trait = rng.choice(tuple(TRAITS))
    v.update({"trait": trait, "trait_desc": TRAITS[trait]})


def _opening(t: _Teller) -> None:
    if t.rng.random() < 0.2:
        t.say("{name} was {desc} who lived {home}.", "In a land not far away, {desc} named {name} lived {home}.")
    else:
        t.say("Once upon a time, there was {desc} named {name}.",
              "Once upon a time, there lived {desc} named {name}.",
              "There was once {desc} called {name}.",
              "Once there was {desc} named {name}.")
        t.maybe(0.5, "{He} lived {home}.", "{name} lived {home} with {his} {adult_lc}.")
    t.maybe(0.6, "{name} was very {trait} and {trait_desc}.", "{He} was a {trait} {kind} who {trait_desc}.")
    t.maybe(0.6, "{His} favorite toy was {his} {oadj} {obj}.", "{He} loved {his} {oadj} {obj} very much.",
            "Every day, {he} liked to {likes}.", "More than anything, {name} loved to {likes}.")
    t.paragraph()


def _closing(t: _Teller, *morals: str) -> None:
    t.say(*morals)
    t.maybe(0.3, "It was the best day ever.", "And they all lived happily ever after.",
            "{name} went to bed that night with a big smile.", "{name} would never forget that day.")


def _lost_and_found(t: _Teller) -> None:
    t.say("One {time}, {name} went to {place} with {his} {oadj} {obj}.",
          "One {time}, {name} and {his} {adult_lc} took {his} {obj} to {place}.",
          "{weather} {name} took {his} {oadj} {obj} and went to {place}.")
    t.maybe(0.6, "There were {sight1} and {sight2}.", "{He} saw {sight1} and {sight2}.")
    t.say("{He} {activity} and had {fun}.", "{He} {activity} for a long time.",
          "First, {he} {activity}. Then {he} {activity2}.")
    t.say("But when it was time to go home, {his} {obj} was gone!",
          "When {he} looked down, {his} {obj} was not there anymore.",
          "{Then}, {name} saw that {his} {obj} was missing.")
    t.say('"Oh no! Where is my {obj}?" {he} {cried}.', '"My {obj}! I lost my {obj}!" {he} {cried}.')
    t.maybe(0.5, "{name} felt {sad}. Tears came to {his} eyes.", "{His} lip began to shake.")
    t.paragraph()
    t.say("{Then}, {his} friend {friend} came by.", "{Then}, {friend} the {fkind} walked over.",
          "{friend}, {fdesc} who lived nearby, heard {him}.")
    t.say('"What is wrong?" asked {friend}.', '"Why are you sad?" asked {friend}.')
    t.say('"I lost my {obj}," said {name}.', '"I can\'t find my {oadj} {obj}," said {name}.')
    t.say('"Don\'t worry. I will help you look," said {friend}.', '"Let\'s look for it together," said {friend}.')
    t.say("They looked {spot1}, but it was not there.", "First they looked {spot1}. Nothing.")
    t.say("They looked {spot2}, but it was not there either.", "Next they looked {spot2}. Still nothing.")
    t.maybe(0.5, '"Maybe it is gone forever," said {name}.', "{name} almost gave up.")
    t.say("{Then}, {friend} saw something {spot3}. It was the {obj}!",
          "Then {name} looked {spot3}, and there it was!",
          '"Look!" said {friend}, pointing {spot3}. There was the {oadj} {obj}!')
    t.paragraph()
    t.say("{name} was {happy}. {He} gave {friend} {hug}.",
          "{name} jumped up and down. {He} hugged {his} {obj} and then hugged {friend}.")
    t.say('"Thank you, {friend}! You are a good friend," said {name}.', '"Thank you for helping me," said {name}.')
    t.maybe(0.6, "Then they {played} together until the sun went down.")
    _closing(t, "From then on, {name} always kept {his} {obj} close.",
             "{name} learned that it is good to have a friend when things go wrong.",
             "After that day, {name} was always careful with {his} {obj}.")


def _sharing(t: _Teller) -> None:
    if t.rng.random() < 0.5:
        treat = t.rng.choice(tuple(TREAT_WORDS))
        the_treat, it = TREAT_WORDS[treat]
        t.v.update({"treat": treat, "the_treat": the_treat, "it": it})
        t.say("One {time}, {adult} gave {name} {treat}.", "{name} found {treat} in {his} lunch box.",
              "{at_place}, {name} had {treat} for a snack.")
        t.say("{He} wanted to eat {it} all by {himself}.", "{He} did not want to share {it} with anyone.")
        t.say("{Then}, {friend} came over and looked at {the_treat}.")
        t.say('"That looks yummy. Can I have some?" asked {friend}.', '"May I have a little?" asked {friend}.')
        t.say('"No! It is mine," said {name}.', '"No, I want {it} all," said {name}.')
        t.say("{friend} looked down and walked away slowly.", "{friend}'s face fell, and {fhe} sat down alone.")
        t.paragraph()
        t.say("{name} took a bite, but it did not taste as good as before.",
              "{name} ate a little, but {he} did not feel {happy}.")
        t.say("{He} looked at {friend}, who was sitting all alone.")
        t.maybe(0.6, '{adult} saw this and said softly, "Things are better when we share."',
                '{name} remembered what {adult} always said: "Sharing is caring."')
        t.say("{name} walked over to {friend}.")
        t.say('"I am sorry. Do you want half?" asked {name}.', '"Here, let\'s share," said {name}.')
        t.paragraph()
        t.say("{friend} {smiled}. They sat down together and shared {the_treat}.")
        t.say("It tasted much better that way.", "It was the best snack ever.")
    else:
        t.say("One {time}, {name} was playing with {his} {oadj} {obj} {at_place}.",
              "{weather} {name} took {his} new {obj} to {place}.")
        t.say('{friend} came running. "Can I play too?" {fhe} asked.',
              '{friend} saw the {obj} and asked, "Can I have a turn?"')
        t.say('{name} held the {obj} tight. "No, it is mine!" {he} said.',
              '"No, I want to {play} by myself," said {name}.')
        t.say("{friend} reached for the {obj}, and they both pulled and pulled.",
              "{friend} tried to take the {obj}, and soon they were both shouting.")
        t.paragraph()
        t.say('{adult} came over. "What is going on?" {ahe} asked.',
              '{Then}, {adult} heard the noise and came to see.')
        t.say('"{friend} wants my {obj}," said {name}.',
              '"It is mine!" said {name}. "And I want a turn!" said {friend}.')
        t.say('{adult} said, "Why don\'t you take turns? Then you can both have fun."',
              '"When we share, everyone can play," said {adult} kindly.')
        t.say("{name} thought about it. Then {he} let {friend} {play} first.",
              "{name} gave the {obj} to {friend}. {He} counted to twenty, and then it was {his} turn.")
        t.paragraph()
        t.say("They {played} together and laughed and laughed.", "{Soon}, they {played} and had {fun}.")
        t.say("Playing together was much more fun than playing alone.")
    _closing(t, "{name} learned that sharing makes everyone {happy}.", "Sharing made {name} feel warm inside.",
             "From that day on, {name} and {friend} always shared.")


def _fear_overcome(t: _Teller) -> None:
    shows, comfort, attempt, truth = t.rng.choice(FEARS)
    t.say(shows)
    t.maybe(0.5, "{His} heart beat fast.", "{He} wanted to run away.", '"I can\'t do it," {he} said.')
    t.paragraph()
    t.say(comfort)
    t.maybe(0.5, '"Will you stay with me?" asked {name}. "Of course," came the answer.',
            "{name} thought about it for a long time.")
    t.say(attempt)
    t.say(truth)
    t.paragraph()
    t.say("{name} felt {proud}.", "{name} was not {scared} anymore. {He} felt {proud}.")
    t.say('"I was brave!" {he} said.', '"That was not so scary after all," said {name} with a smile.')
    _closing(t, "{name} learned that being brave means trying, even when you feel {scared}.",
             "Sometimes the things that scare us are not so bad when we look at them closely.",
             "From that day on, {name} was a little braver every day.")


def _making_a_friend(t: _Teller) -> None:
    t.say("{name} had just moved to a new town. {He} did not have any friends yet and felt {lonely}.",
          "One {time}, {name} went to {place}, but there was no one to play with. {He} felt {lonely}.",
          "{weather} {name} sat {at_place}, all by {himself}.")
    t.say("{Then}, {he} saw {fdesc} sitting all alone.", "{He} noticed {fdesc} standing {spot2}.")
    t.say("The {fkind} looked {sad}, too.", "The {fkind} was looking at the ground.")
    t.paragraph()
    t.say("{name} walked over slowly.", "{name} was a little shy, but {he} walked over.")
    t.say('"Hi! I am {name}. What is your name?" {he} asked.', '"Hello," said {name}. "Are you all alone?"')
    t.say('"I am {friend}," said the {fkind} quietly.', '"My name is {friend}," said the {fkind}.')
    t.maybe(0.6, '"I like your {oadj} {obj}," said {friend}.',
            '"I am new here," said {friend}. "Me too!" said {name}.')
    t.say('"Do you want to {play} with me?" asked {name}.', '"Let\'s {play} together!" said {name}.')
    t.say("{friend}'s face lit up. \"Yes!\"", "{friend} {smiled} and nodded.")
    t.paragraph()
    t.say("They {played}. Then they {activity}.", "First they {activity}. Then they {played}.")
    t.say("They laughed so much that their tummies hurt.", "They had {fun}.")
    t.maybe(0.5, "{friend} told {name} a funny joke, and {name} told {friend} a secret.",
            "They found out that they both liked to {likes}.")
    t.say('When the sun began to set, {friend} asked, "Can we play again tomorrow?"',
          'When it was time to go, {name} said, "See you tomorrow, {friend}!"')
    t.paragraph()
    _closing(t, "From that day on, {name} and {friend} were best friends.",
             "{name} learned that a new friend can be just one hello away.",
             "{name} was never {lonely} again, because now {he} had a friend.")


def _accident_repair(t: _Teller) -> None:
    t.say("One {time}, {name} and {friend} were playing with {name}'s {oadj} {obj} {at_place}.",
          "{weather} {name} and {his} friend {friend} took the {obj} to {place}.")
    t.say("They {played}.", "They took turns. First {name}, then {friend}.")
    t.say("{Then}, {friend} pulled too hard, and {broke}!", "But {friend} was not careful, and {broke}.",
          "Oh no! {Broke}!")
    t.paragraph()
    t.say('"You broke it!" {name} shouted. {He} was very angry.',
          "{name} looked at the {obj}. {He} felt {sad}.")
    t.say("{friend} began to cry. \"I am so sorry,\" {fhe} said. \"It was an accident.\"",
          '"I did not mean to," said {friend} in a small voice.')
    t.say("{name} saw how sad {friend} was, and {he} knew it was an accident.",
          "{name} took a deep breath. {He} did not want to be mad at {his} friend.")
    t.say('"It\'s okay," said {name}. "Let\'s ask {adult} to help."')
    t.paragraph()
    t.say('They ran to {adult}. "Can you fix it?" asked {name}.', "They took the {obj} home to {adult}.")
    t.say('{adult} looked at it and said, "Let\'s fix it together."', '"I think we can fix it," said {adult}.')
    t.say("Together they {fix}.", "{adult} showed them how, and they {fix}.")
    t.say("{Soon}, the {obj} was as good as new.", "It had a little mark now, but {name} loved it even more.")
    t.maybe(0.6, "Then {name} and {friend} went back outside and {played} again.")
    _closing(t, "{name} learned that accidents happen, and it is better to fix things together than to be angry.",
             "{name} and {friend} learned that friends forgive each other.",
             "Fixing the {obj} together made them even better friends.")


def _honesty(t: _Teller) -> None:
    t.v["thing"] = t.rng.choice(HOUSE_THINGS)
    t.say("One rainy day, {name} was playing with {his} {obj} in the living room.",
          "{name} was playing with {his} {oadj} {obj} in the house, even though {adult} said to play outside.")
    t.say("{He} threw it up high, again and again.", "{He} ran around and around the table with it.")
    t.say("{Then}, it bumped into {adult}'s {thing}. Crash! It fell and broke into pieces.",
          "The {obj} hit {adult}'s {thing}. It wobbled, and then it fell to the floor and broke.")
    t.paragraph()
    t.say("{name} was {scared}.", "{name}'s heart beat fast.")
    t.say("{He} thought about hiding the pieces under the rug.", "Maybe {adult} would not find out, {he} thought.")
    t.say("But {he} knew that hiding it would be wrong.", "But it did not feel right to keep a secret.")
    t.say("{name} walked slowly to the kitchen, where {adult} was cooking.", "{He} went to find {adult}.")
    t.say('"{adult}, I broke your {thing}. I am sorry," {he} said quietly.',
          '"I have to tell you something," said {name}. "I broke your {thing}."')
    t.paragraph()
    t.say("{adult} looked at the pieces. Then {ahe} knelt down and gave {name} {hug}.")
    t.say('"Thank you for telling me the truth," said {adult}. '
          '"I am sad about my {thing}, but I am proud of you."',
          '"Things can be fixed," said {adult}. "I am happy that you were honest with me."')
    t.say("Together they glued the pieces back together.", "They cleaned up the pieces together.")
    t.maybe(0.6, "After that, {name} always played with {his} {obj} outside.")
    _closing(t, "{name} learned that telling the truth is always best, even when it is hard.",
             "Being honest made {name} feel light and happy inside.")


def _helping(t: _Teller) -> None:
    find, help_, end = t.rng.choice(TROUBLES)
    t.say("One {time}, {name} was walking to {place} with {adult}.", "{weather} {name} went to play {at_place}.",
          "One {time}, {name} was playing {at_place}.")
    t.maybe(0.5, "{He} saw {sight1} and {sight2}.", "{He} {activity}.")
    t.say(find)
    t.say('"Oh no!" said {name}. "I have to help."', '"Poor thing," said {name}.',
          "{name} knew {he} had to do something.")
    t.paragraph()
    t.say(help_)
    t.say(end)
    t.paragraph()
    t.say("{name} felt warm inside.", "{name} was {happy} that {he} could help.")
    _closing(t, "Helping others made {name} feel {happy}.", "Being kind is always the right thing to do.",
             "{name} learned that even a small {kind} can do a big kindness.")


def _gift(t: _Teller) -> None:
    make, mishap = t.rng.choice(PRESENTS)
    if t.rng.random() < 0.5:
        t.v.update({"who": t.v["adult"], "helper": t.v["friend"], **_pronouns(t.v["ahe"] == "she", "r")})
    else:
        t.v.update({"who": t.v["friend"], "helper": t.v["adult"], **_pronouns(t.v["fhe"] == "she", "r")})
    t.say("Tomorrow was {who}'s birthday, and {name} wanted to give {rhim} a special present.",
          "{name} wanted to surprise {who}, because {rhe} was always so kind.")
    t.say("But {name} did not have any money to buy a present.", "{He} thought and thought about what to give.")
    t.say('"I know! I will make something," {he} said.', "Then {he} had an idea.")
    t.paragraph()
    t.say(make)
    t.say(mishap)
    t.maybe(0.5, "It took a long time, but {name} did not give up.", "{He} worked on it all afternoon.")
    t.say("When it was done, {he} hid the present behind {his} back.", "{He} wrapped it in paper and hid it.")
    t.paragraph()
    t.say('The next day, {name} gave the present to {who}. "Surprise!" {he} shouted.',
          '"Happy birthday, {who}!" said {name}, and held out the present.')
    t.say("{who}'s eyes filled with joy.", "{who} opened it slowly and gasped.")
    t.say('"This is the best present ever," said {who}. "You made it just for me?"',
          '"I love it," said {who}, and gave {name} {hug}.')
    _closing(t, "{name} learned that the best presents are made with love.",
             "Giving the present made {name} even happier than getting one.")


def _learning(t: _Teller) -> None:
    skill, fail, advice, success = t.rng.choice(SKILLS)
    t.v["skill"] = skill.format_map(t.v)
    t.say("{name} really wanted to learn to {skill}.", "More than anything, {name} wanted to {skill}.")
    t.maybe(0.5, "All of {his} friends could do it, but {name} could not.",
            "{He} had tried before, but it was hard.")
    t.paragraph()
    t.say("The first time {he} tried, it did not go well.", "{He} tried and tried.")
    t.say(fail)
    t.maybe(0.5, "{He} tried again, but the same thing happened.", "{He} tried again, and it was still hard.")
    t.say('"I will never learn," {he} said, and {he} sat down, feeling {sad}.', "{name} wanted to give up.")
    t.paragraph()
    t.say(advice)
    t.say('"Everyone finds it hard at first. Try one more time."', '"You are getting better every time."')
    t.say("{name} stood up and tried again.", "{name} took a deep breath and tried once more.")
    t.say(success)
    t.paragraph()
    t.say('"I did it!" {he} {shouted}.', '"Look at me!" {he} {shouted}.')
    t.say("Everyone clapped, and {name} felt {proud}.", "{name} felt {proud}.")
    _closing(t, "{name} learned that if you keep trying, you can do hard things.",
             "{name} learned that practice makes things easier.")


def _rainy_day(t: _Teller) -> None:
    t.v["indoor"] = t.rng.choice(INDOOR_FUN)
    t.v["treat"] = t.rng.choice(tuple(TREAT_WORDS))
    t.say("{name} and {friend} planned to have a picnic {at_place}.",
          "{name} was going to {place} with {friend} that day.")
    t.say("They packed sandwiches, juice, and {treat}.", "{He} was so excited that {he} woke up early.")
    t.say("But then dark clouds came, and it began to rain.", "But when {he} looked outside, it was raining hard.")
    t.say('"Now we can\'t go," said {name} sadly.', '"It is not fair!" said {name}, and {he} stamped {his} foot.')
    t.paragraph()
    t.say('{adult} said, "Rain can be fun, too. Let\'s have an adventure inside."',
          '{adult} smiled and said, "I have an idea."')
    t.say("So they {indoor}.", "They {indoor}.")
    t.say("They laughed and had {fun}.", "It was even more fun than they thought.")
    t.paragraph()
    t.say("{Soon}, the rain stopped. The sun came out, and a {big} rainbow stretched across the sky.")
    t.say("{name} and {friend} put on their boots and jumped in all the puddles. Splash!",
          "They went out and looked at the rainbow. It had every color {name} knew.")
    _closing(t, "{name} learned that even a rainy day can be a happy day.",
             "Sometimes the best days are the ones you do not plan.")


def _discovery(t: _Teller) -> None:
    thing, act, outcome = t.rng.choice(MYSTERIES)
    t.v["thing"] = thing
    t.say("One {time}, {name} was exploring {place}.", "{weather} {name} went to {place} to look around.")
    t.maybe(0.5, "{He} saw {sight1} and {sight2}.", "{He} {activity}.")
    t.say("{Then}, {he} saw something {spot1}. It was {thing}!",
          "{spot1}, {he} found {thing}.")
    t.say('"What is this?" {he} wondered.', '"Wow!" said {name}. "Where did this come from?"')
    t.maybe(0.5, "{name} was very curious.", "{He} showed it to {adult}, who said, \"Let's find out.\"")
    t.paragraph()
    t.say(act)
    t.say(outcome)
    t.paragraph()
    _closing(t, "{name} learned that the world is full of surprises if you keep your eyes open.",
             "{name} was glad {he} had been so curious.",
             "It was the best thing {name} had ever found.")


_PLOTS = (_lost_and_found, _sharing, _fear_overcome, _making_a_friend, _accident_repair, _honesty, _helping,
          _gift, _learning, _rainy_day, _discovery)


def story_at(seed: int, index: int) -> str:
    """Story `index` of the corpus for `seed`: depends on nothing else."""
    rng = random.Random(f"revbook-stories/{seed}/{index}")
    plot = rng.choice(_PLOTS)
    t = _Teller(rng)
    _cast(t, breakable=plot is _accident_repair)
    _opening(t)
    plot(t)
    return t.text()


def synthetic_stories(n_stories: int, seed: int = 0) -> Iterator[str]:
    """`n_stories` short children's stories, the same for the same seed (story i never depends on n_stories)."""
    for i in range(n_stories):
        yield story_at(seed, i)
