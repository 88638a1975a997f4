"""PROST's configs (subsets), name -> description: ``default`` and one per concept (the ``group`` column).

Read by the builder (``prost.py``) and, without importing ``datasets``, by the argument checks.
"""

CONFIGS = {
    "default": "all 18,736 questions",
    "directions": "direction after turns and of a thrown or dropped ball (16 questions)",
    "mass": "heaviest/lightest of four objects (1,440)",
    "height": "tallest/shortest of four objects (1,440)",
    "circumference": "largest/smallest circumference of four objects (1,440)",
    "stacking": "the one stackable (or not stackable) object among four (2,400)",
    "rolling": "the one rollable (or not rollable) object among four (2,400)",
    "grasping": "the one graspable (or not graspable) pile among four (2,400)",
    "breaking": "the one breakable (or unbreakable) object among four (2,400)",
    "sliding": "the one slippery (or non-slippery) surface among four (2,400)",
    "bouncing": "the one bouncy (or non-bouncy) surface among four (2,400)",
}
