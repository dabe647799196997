"""What the synthetic stories are made of: the word tables of `rev.data.stories`.

The cast (children's and pets' names, animals, homes, traits, grown-ups), the places with their sights, hiding
spots and activities, the objects with how they break and are mended, synonyms drawn afresh at each use, and
the material of each plot (one row per telling). Data only: the grammar that tells stories from these tables
lives in `rev.data.stories`. Editing a table changes every story of every seed, and so every corpus built
from them.
"""

GIRLS = ("Lily", "Mia", "Emma", "Sara", "Anna", "Lucy", "Ella", "Zoe", "Amy", "Ruby", "Rosie", "Daisy", "Molly",
         "Chloe", "Grace", "Ava", "Ivy", "Nora", "Maya", "Kate", "Jenny", "Sophie", "Hannah", "Tara", "Lena",
         "Rita", "Nina", "Bella", "Clara", "Poppy", "Sue", "May", "Jill", "Elsie", "Hazel", "Iris")
BOYS = ("Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Tim", "Finn", "Jake", "Noah", "Oliver", "Luke", "Dan", "Eli",
        "Owen", "Ryan", "Adam", "Theo", "Henry", "Milo", "Ollie", "Billy", "Bobby", "Charlie", "Joe", "Pete",
        "Alex", "Kai", "Toby", "Jim", "Ned", "Ted", "Zack", "Hugo", "Oscar", "Felix")
PET_NAMES = ("Pip", "Coco", "Bubbles", "Fluffy", "Spot", "Sunny", "Buddy", "Pinky", "Whiskers", "Bingo", "Hoppy",
             "Rusty", "Nutmeg", "Pebble", "Ziggy", "Honey", "Button", "Patch", "Snowy", "Peanut", "Muffin",
             "Tiny", "Dot", "Biscuit", "Puddles", "Maple", "Clover", "Socks", "Pepper", "Twig")
# animal -> (where it lives, a thing it likes to do)
ANIMALS = {
    "bunny": ("in a cozy hole under a big tree", "hop in the grass"),
    "puppy": ("in a little house with a red door", "chase its tail"),
    "kitten": ("in a warm house by the river", "chase balls of yarn"),
    "bear cub": ("in a big cave in the woods", "eat sweet honey"),
    "fox": ("in a den at the edge of the forest", "run through the tall grass"),
    "duck": ("by a quiet pond", "splash in the water"),
    "mouse": ("in a tiny hole in the wall", "nibble on cheese"),
    "owl": ("in a high nest in an old oak tree", "look at the stars"),
    "frog": ("on a green lily pad", "jump from leaf to leaf"),
    "squirrel": ("in a round nest high in a tree", "collect nuts"),
    "piglet": ("on a big farm", "roll in the mud"),
    "lamb": ("in a green field on a farm", "run and jump in the sun"),
    "turtle": ("near a sandy beach", "swim slowly in the sea"),
    "elephant": ("in a warm, sunny land", "spray water with its trunk"),
    "monkey": ("in a tall tree in the jungle", "swing from branch to branch"),
    "hedgehog": ("under a pile of leaves in a garden", "look for bugs"),
    "bird": ("in a small nest in a cherry tree", "sing pretty songs"),
    "kangaroo": ("in a wide, dry land", "bounce as high as it could"),
}
CHILD_HOMES = ("in a little house by the woods", "near a big park", "in a cozy house with a red door",
               "in a tiny village by the sea", "in a busy town", "on a farm with many animals",
               "in a small house on a hill", "in a yellow house on a quiet street")
TRAITS = {
    "kind": "always tried to help others",
    "curious": "liked to ask questions about everything",
    "shy": "did not talk very much",
    "brave": "liked to try new things",
    "playful": "loved to run and laugh all day",
    "clever": "liked to solve puzzles",
    "cheerful": "always had a big smile",
    "gentle": "was always careful with small things",
    "busy": "never liked to sit still",
    "silly": "liked to make funny faces",
}
GROWNUPS = (("Mom", "she"), ("Dad", "he"), ("Grandma", "she"), ("Grandpa", "he"), ("Mama", "she"),
            ("Papa", "he"))

# place -> where ("in the park"), sights, spots (where something can hide), activities (past tense)
PLACES = {
    "the park": ("in the park",
                 ("tall green trees", "a big red slide", "swings that went up high", "a pond with ducks"),
                 ("under the slide", "behind a big tree", "next to the swings", "in the tall grass",
                  "near the pond", "under a bench"),
                 ("ran on the soft grass", "went down the slide", "played on the swings", "fed the ducks")),
    "the beach": ("at the beach",
                  ("soft yellow sand", "big blue waves", "pretty shells", "white birds in the sky"),
                  ("under a pile of sand", "behind a big rock", "next to the beach towel", "near the water",
                   "near the sand castles", "under a beach chair"),
                  ("built a big sand castle", "splashed in the waves", "looked for shells", "dug a deep hole")),
    "the forest": ("in the forest",
                   ("tall old trees", "tiny mushrooms", "a little stream", "birds singing in the branches"),
                   ("under a pile of leaves", "behind an old log", "next to a mossy rock", "inside a hollow tree",
                    "near the stream", "under a bush"),
                   ("jumped over logs", "picked berries", "listened to the birds", "followed a little path")),
    "the garden": ("in the garden",
                   ("bright flowers", "a small pond", "green peas and carrots", "busy bees"),
                   ("under a big leaf", "behind the flower pots", "next to the watering can",
                    "in the carrot patch", "under the bench", "near the gate"),
                   ("watered the flowers", "chased butterflies", "dug in the dirt", "picked red tomatoes")),
    "the farm": ("on the farm",
                 ("brown cows", "a big red barn", "chickens", "a tall haystack"),
                 ("in the hay", "behind the barn", "next to the chicken coop", "under the old tractor",
                  "near the fence", "by the water trough"),
                 ("fed the chickens", "rode on the tractor", "jumped in the hay", "gave the horse an apple")),
    "the playground": ("at the playground",
                       ("a tall climbing frame", "a sandbox", "a merry-go-round", "a long yellow slide"),
                       ("in the sandbox", "under the climbing frame", "behind the slide", "next to the fence",
                        "under the seesaw", "near the gate"),
                       ("climbed to the top", "played in the sandbox", "went round on the merry-go-round",
                        "played tag")),
    "the meadow": ("in the meadow",
                   ("wild flowers", "butterflies", "a big old oak tree", "soft green grass"),
                   ("in the tall grass", "behind the oak tree", "next to a big stone", "among the flowers",
                    "near a rabbit hole", "under a bush"),
                   ("rolled down the hill", "picked flowers", "chased butterflies", "looked at the clouds")),
    "the lake": ("by the lake",
                 ("clear blue water", "little fish", "a wooden dock", "green reeds"),
                 ("under the dock", "in the reeds", "next to the boat", "behind a rock", "near the water",
                  "under a willow tree"),
                 ("threw stones into the water", "watched the fish", "walked along the shore",
                  "put their feet in the water")),
    "the backyard": ("in the backyard",
                     ("a swing on a tree", "a little vegetable patch", "a fence", "a bird bath"),
                     ("under the porch", "behind the shed", "next to the bird bath", "in the bushes",
                      "near the fence", "under the swing"),
                     ("played catch", "ran through the sprinkler", "had a picnic on the grass", "made mud pies")),
    "the zoo": ("at the zoo",
                ("big gray elephants", "tall giraffes", "noisy monkeys", "a sleepy lion"),
                ("under a bench", "next to the map", "behind the ice cream cart", "near the monkey house",
                 "by the water fountain", "under a bush"),
                ("watched the monkeys swing", "fed the goats", "looked at the giraffes",
                 "laughed at the penguins")),
    "the library": ("at the library",
                    ("rows and rows of books", "soft chairs", "a reading corner", "big windows"),
                    ("under a table", "behind a bookshelf", "next to the big chair", "next to the book cart",
                     "near the door", "by the big window"),
                    ("read a book about dragons", "looked at picture books", "listened to a story",
                     "found a book about stars")),
    "the hill": ("on the hill",
                 ("a big sky", "white clouds", "a lone tree on top", "the whole town far below"),
                 ("behind the lone tree", "in the long grass", "next to a big rock", "under a bush",
                  "near the top", "by the little path"),
                 ("ran up to the top", "rolled down the hill", "flew paper planes", "looked at the town")),
    "the school": ("at school",
                   ("a big classroom", "colorful pictures on the walls", "a fish tank", "a playground outside"),
                   ("under a desk", "behind the reading chair", "next to the toy box", "next to the fish tank",
                    "near the door", "by the window"),
                   ("painted pictures", "sang songs", "counted to one hundred", "played with clay")),
    "the market": ("at the market",
                   ("stalls full of fruit", "a man selling flowers", "big baskets", "bright red apples"),
                   ("under a fruit stall", "behind a big basket", "next to the flower stall",
                    "near the bread shop", "under a cart", "by the fountain"),
                   ("bought some apples", "smelled the fresh bread", "looked at the flowers",
                    "tasted a sweet peach")),
}

# object -> adjectives, play (infinitive), played (past), what goes wrong, how it is mended (None: unbreakable)
OBJECTS = {
    "ball": (("red", "blue", "bouncy", "big yellow", "shiny green", "striped"),
             "kick the ball", "kicked the ball high into the air",
             "the ball rolled into a thorny bush and got a hole",
             "put a patch on the hole and pumped the ball full of air again"),
    "kite": (("red", "rainbow", "big blue", "paper", "bright orange"),
             "fly the kite", "flew the kite high in the sky",
             "the kite got stuck in a tree and its paper tore",
             "got the kite down and taped the tear with strong tape"),
    "teddy bear": (("soft brown", "old", "fluffy", "little", "cuddly"),
                   "have a tea party with the teddy bear", "hugged the teddy bear tight",
                   "one of the teddy bear's arms came loose",
                   "sewed the arm back on with a needle and thread"),
    "doll": (("pretty", "little", "rag", "smiling"),
             "dress up the doll", "dressed the doll in a tiny hat",
             "the doll's dress ripped down the side",
             "sewed the dress with a needle and pink thread"),
    "toy car": (("red", "fast", "little blue", "shiny", "green"),
                "race the toy car", "raced the toy car down a ramp",
                "a wheel came off the toy car",
                "put the wheel back on with a tiny screw"),
    "toy boat": (("little wooden", "red", "white", "tiny"),
                 "sail the boat", "sailed the boat in a big puddle",
                 "the mast of the boat snapped",
                 "glued the mast back on and let it dry in the sun"),
    "picture book": (("big", "old", "colorful", "new"),
                     "read the book", "read the picture book",
                     "a page of the book tore in half",
                     "taped the page with clear tape so the words lined up"),
    "drum": (("small", "red", "loud", "shiny"),
             "play the drum", "played the drum, boom, boom, boom",
             "the top of the drum split",
             "stretched a new top over the drum and tied it tight"),
    "toy train": (("wooden", "long", "green", "little"),
                  "play with the toy train", "pushed the toy train around the track",
                  "the last car came off the toy train",
                  "bent the little hook back so the cars held together"),
    "robot": (("shiny", "silver", "little", "funny"),
              "make the robot walk", "made the robot walk and beep",
              "the robot's arm fell off",
              "snapped the arm back into place and tightened the screw"),
    "balloon": (("red", "big", "shiny", "purple"),
                "bounce the balloon", "bounced the balloon up in the air", None, None),
    "hat": (("funny", "big", "straw", "blue"),
            "try on the hat", "took turns wearing the hat", None, None),
    "jump rope": (("long", "pink", "green"),
                  "jump with the rope", "jumped rope and counted the jumps",
                  "the jump rope snapped in the middle",
                  "tied the two ends together with a strong knot"),
    "bucket": (("little", "blue", "yellow"),
               "fill the bucket with sand", "filled the bucket with sand and water",
               "the handle of the bucket broke off",
               "tied a new string handle onto the bucket"),
    "paper plane": (("little", "white", "folded"),
                    "throw the paper plane", "threw the paper plane and watched it glide",
                    "a wing of the paper plane got bent",
                    "folded the wing straight and taped it"),
    "scarf": (("warm", "striped", "woolly", "soft"),
              "wear the scarf", "wrapped the scarf around their necks",
              "the scarf got a big hole in it",
              "knitted the hole closed with new yarn"),
    "shell": (("pretty", "pink", "spotted", "shiny"),
              "listen to the sea in the shell", "held the shell up to their ears to hear the sea", None, None),
    "crown": (("golden", "paper", "sparkly"),
              "play king and queen with the crown", "played king and queen with the crown",
              "the paper crown got crumpled",
              "smoothed the crown flat and glued on new sparkles"),
}
WEATHER = ("It was a sunny day.", "The sun was shining and the birds were singing.",
           "It was a warm spring morning.", "It was a cool, windy day.", "The sky was blue and clear.",
           "It was a bright summer afternoon.", "Big white clouds floated in the sky.",
           "The leaves were red and orange, and the air was crisp.")
# words that get a fresh random pick every time a template uses them
SYNONYMS = {
    "happy": ("happy", "glad", "very happy", "so happy"),
    "sad": ("sad", "upset", "very sad", "sad and worried"),
    "scared": ("scared", "afraid", "a little scared", "very scared"),
    "proud": ("proud", "very proud", "so proud of {himself}"),
    "lonely": ("lonely", "a bit lonely", "sad and alone"),
    "big": ("big", "huge", "great big"),
    "cried": ("cried", "said sadly", "sobbed"),
    "shouted": ("shouted", "called", "yelled happily"),
    "smiled": ("smiled", "grinned", "smiled a big smile"),
    "time": ("morning", "afternoon", "day", "sunny day"),
    "Soon": ("Soon", "After a while", "Before long", "In no time"),
    "Then": ("Then", "Just then", "All of a sudden", "Suddenly"),
    "hug": ("a big hug", "a tight hug", "a warm hug"),
    "fun": ("so much fun", "a lot of fun", "the best time"),
}

CHILD_LIKES = ("play outside", "draw pictures", "sing songs", "read books", "build towers with blocks",
               "help in the kitchen", "look at the clouds", "dance in the living room", "play games")
TREAT_WORDS = {  # treat -> (the short name, pronoun)
    "a big red apple": ("the apple", "it"), "three cookies": ("the cookies", "them"),
    "a cupcake with pink icing": ("the cupcake", "it"), "a bag of grapes": ("the grapes", "them"),
    "a juicy orange": ("the orange", "it"), "a piece of chocolate cake": ("the cake", "it"),
    "some sweet strawberries": ("the strawberries", "them"), "a warm muffin": ("the muffin", "it"),
    "a banana": ("the banana", "it"), "a box of raisins": ("the raisins", "them"),
    "a slice of watermelon": ("the watermelon", "it"), "a honey sandwich": ("the sandwich", "it"),
}


# --- plot material: each plot in stories.py draws one row of its table ---

# fear -> (how it shows up, what the grown-up or friend says, the brave try, what it really was)
FEARS = (
    ("At night, when {adult} turned off the light, {name} felt {scared}. The room was so dark! "
     '"I don\'t like the dark," {he} whispered.',
     '{adult} sat on the bed. "The dark is just the night resting," {ahe} said. '
     '"Everything in your room is still the same."',
     "{name} took a deep breath and opened {his} eyes wide.",
     "{He} saw {his} {obj} on the shelf and the moon shining through the window. The room was not scary at all."),
    ("One day {at_place}, a big brown dog ran up to {name}. It barked loudly! {name} was {scared} and hid "
     "behind {adult}.",
     '"This dog is friendly," said {adult}. "Hold out your hand slowly, and let him sniff it."',
     "{name} held out {his} hand. It was shaking a little. The dog sniffed it.",
     "Then the dog licked {his} hand and wagged its tail. {name} laughed. The dog just wanted to play!"),
    ("{name} went to the lake with {adult}. The water looked deep and cold, and {name} did not want to go in.",
     '"I will hold your hands," said {adult}. "Just kick your feet like a little frog."',
     "{name} stepped into the water. {He} held on tight and kicked {his} feet.",
     "Splash, splash! The water was cool and fun. Soon {name} was paddling all by {himself}."),
    ("One night there was a big storm. Boom! The thunder was so loud that {name} hid under {his} blanket.",
     '{adult} came in and said, "Thunder is just a big noise from the clouds. It cannot hurt you in here."',
     '"Let\'s count after each flash," said {adult}. They counted together: one, two, three, four.',
     "Each time, the thunder was farther away. Soon the storm was gone, and {name} was not scared anymore."),
    ("At the playground, there was a very tall slide. {name} climbed up, but when {he} looked down, "
     "{his} legs shook.",
     '{friend} called from the bottom, "You can do it! I will be right here."',
     "{name} sat down, closed {his} eyes, and let go.",
     '"Wheee!" {He} went down so fast. It was the most fun thing ever! {He} ran back to the ladder to go again.'),
    ("One morning, {name} saw a spider on the wall. It had eight long legs. {name} screamed and ran to {adult}.",
     '"That spider is more scared of you than you are of it," said {adult}. "Let\'s watch it together."',
     "{name} stood next to {adult} and looked at the spider very carefully.",
     "The spider was busy making a web. It was shiny and round, like a tiny wheel. {name} thought it was "
     "beautiful."),
    ("It was {name}'s first day at a new school. {He} did not know anyone, and {his} tummy felt funny.",
     '{adult} knelt down and said, "Just say hello and smile. That is how friends begin."',
     '{name} walked up to {fdesc} named {friend} and said, "Hello. Do you want to play?"',
     "{friend} smiled back. They played with clay all morning, and at lunch they sat together."),
    ("One night, {name} heard a noise at the window. Scratch, scratch, scratch! {He} pulled the blanket up "
     "to {his} nose.",
     '{adult} came in with a little lamp. "Let\'s go and see what it is," {ahe} said.',
     "{name} held {adult}'s hand, and together they looked out of the window.",
     "It was only a branch of the old tree, tapping on the glass in the wind. {name} giggled."),
    ("{name} wanted to ride the big horse at the farm, but the horse was so tall! {name} stepped back.",
     '"His name is Apple. He is very gentle," said the farmer. "I will hold him for you."',
     "{adult} lifted {name} up, and {he} sat on the horse's soft back.",
     "The horse walked slowly around the field. Clip, clop, clip, clop. {name} felt like a king on a throne."),
)

HOUSE_THINGS = ("favorite blue vase", "lamp with the yellow shade", "special cup with little flowers",
                "big flower pot", "old clock", "pretty glass bowl")

# someone in trouble -> (what the hero finds, how the hero helps, how it ends)
TROUBLES = (
    ("{Then}, {he} saw a little bird {spot1}. Its wing was hurt, and it could not fly.",
     "{name} gently picked it up and put it in a box with soft grass. {He} gave it water and seeds. "
     "Every day, {he} took care of the bird.",
     "After a week, the bird's wing was better. It flapped its wings and flew up into the sky. "
     "It sang a happy song, as if to say thank you."),
    ("{Then}, {he} heard a small meow. A kitten was stuck high up in a tree.",
     "{name} could not reach it, so {he} ran to get {adult}. {adult} brought a tall ladder and climbed up.",
     "{adult} carried the kitten down. The kitten purred and rubbed against {name}'s legs."),
    ("{Then}, an old man dropped his bag, and red apples rolled everywhere.",
     "{name} ran to help. {He} picked up the apples one by one and put them back in the bag.",
     '"Thank you, little one," said the old man. He smiled and gave {name} the shiniest apple.'),
    ("{Then}, {he} saw a little duckling all alone {spot1}. It was peeping loudly. It had lost its mother.",
     "{name} looked around. Far away, {he} saw a mother duck. {He} walked slowly toward her, and the duckling "
     "followed {him}, step by step.",
     "The mother duck quacked, and the duckling ran to her. {name} smiled as they swam away together."),
    ("{Then}, {friend} tripped over a stone and fell. {fHis} knee was scraped, and {fhe} began to cry.",
     "{name} helped {fhim} up and walked {fhim} to {adult}, who washed the knee and put a bandage on it.",
     '{friend} stopped crying. "Thank you for helping me," {fhe} said, and gave {name} {hug}.'),
    ("{Then}, {he} saw a beetle lying on its back {spot1}. It waved its tiny legs but could not turn over.",
     "{name} found a leaf and gently slid it under the beetle. Then {he} helped it turn over.",
     "The beetle crawled away into the grass. {name} liked to think it was going home to its family."),
    ("{Then}, {he} saw a puppy with a blue collar {spot1}. It looked lost and was shaking.",
     "{name} read the name on the collar: Rex. There was a street name, too. {name} and {adult} took the puppy "
     "there.",
     'A girl opened the door and cried, "Rex! You came back!" She hugged the puppy and thanked {name} '
     "again and again."),
)

# a present -> (making it, the little mishap on the way)
PRESENTS = (
    ("{He} got out {his} crayons and drew a picture of the two of them {at_place}. "
     "{He} used every color {he} had.",
     "Oops! {He} spilled some water on the corner, but {he} let it dry, and it looked like a little cloud."),
    ("{He} went outside and picked red, yellow and blue flowers. {He} tied them together with a ribbon.",
     "On the way home, a bee buzzed around the flowers, but {name} stayed calm, and it flew away."),
    ("With help from {helper}, {he} mixed flour, sugar and eggs in a big bowl. They baked cookies shaped like "
     "stars.",
     "Some of the cookies were a little burnt, but most of them were golden and sweet."),
    ("{He} folded a big piece of paper in half and drew a heart on the front. Inside, {he} wrote: I love you.",
     "The glitter spilled all over the table! {name} laughed and cleaned it up."),
    ("{He} put colorful beads on a string, one by one, to make a necklace.",
     "The string slipped, and beads rolled everywhere, so {he} picked them all up and started again."),
    ("{He} found a smooth, flat stone and painted a smiling sun on it.",
     "The paint was still wet when {he} touched it, so {he} had to fix the sun's nose."),
)

# a skill -> (what it is, how the first try goes wrong, the advice, the success)
SKILLS = (
    ("ride {his} new bike", "{He} wobbled and fell down onto the grass.",
     '"Keep your eyes ahead and keep pedaling," said {adult}.',
     "{He} pedaled and pedaled, and the bike went straight! {He} rode all the way to the end of the street."),
    ("swim like a fish", "{He} sank and got water up {his} nose.",
     '"Lie on the water like a star, and kick your legs," said {adult}.',
     "{He} kicked and kicked, and {he} floated! Then {he} swam across the pool all by {himself}."),
    ("tie {his} shoes", "The laces got all tangled into a big knot.",
     '"Make two bunny ears, and cross them over," said {adult}.',
     "{He} made two loops, crossed them, and pulled. It was a perfect bow!"),
    ("whistle like {adult}", "{He} blew and blew, but only air came out.",
     '"Make your lips small and round, and blow softly," said {adult}.',
     "A tiny whistle came out! Then a louder one. Soon {he} could whistle a whole song."),
    ("climb the big tree in the backyard", "{His} foot slipped, and {he} slid back down.",
     '"Hold on to the strong branches, and take one step at a time," said {friend}.',
     "{He} climbed one branch, then another, then another. Soon {he} could see the whole street from the top."),
    ("write {his} name", "The letters came out big and wobbly, and one was backwards.",
     '"Go slowly, one letter at a time," said {adult}.',
     "{He} wrote each letter slowly. There it was: {name}, in neat letters!"),
    ("catch a ball", "The ball bounced off {his} hands and hit {him} on the nose.",
     '"Watch the ball all the way into your hands," said {friend}.',
     "{friend} threw the ball, and {name} watched it closely. Catch! {He} did it!"),
    ("jump rope", "The rope got caught on {his} feet every time.",
     '"Jump just when the rope comes near the ground," said {friend}.',
     "{He} jumped once, twice, ten times without stopping!"),
)

INDOOR_FUN = ("built a big blanket fort in the living room", "made a puppet show with old socks",
              "had their picnic on the kitchen floor", "painted pictures of the sun",
              "baked muffins and licked the spoon", "played hide and seek all over the house")

# something strange found -> (the find, what the hero does with it, what comes of it)
MYSTERIES = (
    ("a small blue egg",
     "{name} took the egg home and kept it warm in a soft blanket. Every day {he} checked on it.",
     "One morning, crack! A tiny bird poked its head out. {name} fed it until it was big and strong, and then it "
     "flew away. But every spring, it came back to sing at {his} window."),
    ("a little gold key", "{name} wondered what it could open. {He} tried the door, the toy box, and the gate.",
     "At last, {he} tried an old box in the attic. Click! Inside were toys from when {adult} was little. "
     "{adult} laughed and told {him} stories about every one."),
    ("an old paper map with a red X on it", "{name} and {friend} followed the map past the tall tree and the "
     "big rock.",
     "Under the X, they dug a hole and found a tin box full of shiny buttons and marbles. They shared the "
     "treasure and kept the map for another day."),
    ("a big brown seed", "{name} planted the seed in a pot and watered it every day.",
     "First a tiny green shoot came up. Then it grew and grew. By summer, it was a sunflower taller than "
     "{name}, with a face as bright as the sun."),
    ("a tiny wooden box", "{name} opened the box very carefully.",
     "Inside was a little music box. When {he} turned the handle, it played a sweet song. {name} and {adult} "
     "danced around the kitchen."),
)
