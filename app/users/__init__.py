"""User management pages for admins (/users/) and the header's organization / project switcher."""
