"""The GitOps hand-off (issue 29): who manages an object from Git (detect), a change as the files a
GitOps repository holds (files), and the commit of those files on a new branch of that repository (repo)."""
