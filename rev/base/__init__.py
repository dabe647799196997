"""What every room above stands on: the settings of a run and the plumbing of the command line.

`profiles` (run sizes per profile: `get_profile` resolves a name once), `device` (which device, which autocast),
`units` (`MIB`, the one mebibyte), `files` (the one atomic writer, file walks and zips), `cli` (how a command
reports a user's mistake, argument types), `progress` (text bars when run headless), `results_folder` (the layout
of `results/<profile>/`). Imports `rev.core` only.
"""
