"""The brand portal (/portal/): views, forms, reads and the few writes only the portal makes
(team invitations, campaign edits). Every view goes through ``access.brand_member`` first."""
