"""The claim flow (/c/…) for the people being rewarded: do the action (TikTok login, WhatsApp
opt-in, a UGC video, or a purchase the partner reported), give name, contact and IBAN, then
follow the payout on a status page behind a signed link. No account, no password."""
