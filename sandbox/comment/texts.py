"""Words the generated comment automation data is made of: campaigns, replies, DMs, errors.

Several languages, as the brands' audiences write in (see `sandbox.fakedata.COMMENT_TEXTS`).
"""

from __future__ import annotations

CAMPAIGNS = (
    "Spring sale",
    "Giveaway",
    "New collection launch",
    "Restock alert",
    "Webinar signup",
    "Free styling guide",
    "Price inquiry",
    "Pop-up store",
    "Summer lookbook",
    "Holiday gift guide",
    "Live shopping",
    "Newsletter signup",
    "新商品のお知らせ",
    "週末限定セール",
    "會員招募",
    "Rebajas de verano",
    "Soldes d'hiver",
)

# Keyword sets an activity listens for; each matches some of fakedata.COMMENT_TEXTS.
# The empty set means every comment triggers (spec section 2, keywords).
KEYWORD_SETS = (
    ("price", "how much", "いくら", "多少錢", "cuánto", "combien", "quanto", "ราคา"),
    ("link", "リンク", "lien"),
    ("info",),
    ("want", "欲しい", "想要", "quiero", "quero"),
    ("buy", "買"),
    ("giveaway",),
    ("drop",),
    (),
)
# Keywords that equal a whole comment, for `match: exact` activities.
EXACT_KEYWORD_SETS = (("info",), ("giveaway",), ("quero!", "info por favor"), ("link pls",))

PUBLIC_REPLIES = (
    "Thanks! Check your DMs 📩",
    "Sent you a DM 💌",
    "Thank you for your comment! 🙌",
    "The link is on its way ✨",
    "DMを送りました！",
    "コメントありがとうございます🙏",
    "已私訊您 😊",
    "¡Te enviamos un DM!",
    "On t'a envoyé un DM !",
    "Enviamos por DM 😉",
    "ส่งข้อความไปแล้วนะคะ",
)

DM_TEXTS = (
    "Here's the link you asked for 👇",
    "Thanks for your interest! The new collection is live now.",
    "Hi! Prices and sizes are on the product page below.",
    "Thanks for joining the giveaway 🎉 Winners are announced on Friday.",
    "お問い合わせありがとうございます！詳細はこちらからご覧いただけます。",
    "感謝您的留言！商品資訊請看這裡 👇",
    "¡Gracias por escribirnos! Aquí tienes toda la información.",
    "Merci pour ton message ! Voici le lien.",
    "Obrigado pelo comentário! Confira os detalhes abaixo.",
    "ขอบคุณที่สนใจค่ะ รายละเอียดตามลิงก์ด้านล่างเลย",
)

BUTTON_TITLES = (
    "Shop now",
    "Get the guide",
    "Book a seat",
    "View product",
    "詳しく見る",
    "立即購買",
    "Ver más",
    "Voir l'offre",
)

CARD_TITLES = (
    "Linen shirt",
    "Everyday tote",
    "Trail runner",
    "Gift card",
    "Ceramic mug",
    "限定トートバッグ",
    "保溫瓶",
    "Chaqueta vaquera",
)
CARD_SUBTITLES = (
    "New this week",
    "Back in stock",
    "Free shipping over $50",
    "残りわずか",
    "限時優惠",
    None,
)

CAPTIONS = (
    "New drop is here 🔥 Comment LINK and we'll DM you the details!",
    "Which colour is your favourite? Comment below 👇",
    "GIVEAWAY 🎁 Comment and follow to enter. Ends Sunday.",
    "Behind the scenes at our studio ✨",
    "Restocked! Comment INFO for sizes and prices.",
    "新作入荷しました！コメントで「いくら」と送ってください📩",
    "週末限定セール開催中🛍️",
    "新品上市！留言「想要」我們私訊你 💌",
    "¡Nueva colección! Comenta INFO y te enviamos el enlace.",
    "Nouvelle collection en ligne 🌿 Commente LIEN !",
    "Chegou! Comente QUERO para receber o link.",
    "สินค้าใหม่มาแล้วค่ะ คอมเมนต์ ราคา ได้เลย",
)

# Failure reasons by platform and action (public_reply, dm), as the platform APIs word them.
ERRORS = {
    ("instagram", "public_reply"): (
        "Instagram API: the comment was deleted before the reply was posted",
        "Instagram API: (#4) Application request limit reached",
    ),
    ("instagram", "dm"): (
        "Instagram API: user has restricted DMs",
        "Instagram API: the 24-hour messaging window has closed",
        "Instagram API: (#551) This person isn't available right now",
    ),
    ("facebook", "public_reply"): (
        "Facebook API: (#200) Permissions error",
        "Facebook API: the comment was hidden by the Page",
    ),
    ("facebook", "dm"): (
        "Facebook API: (#10) This message is sent outside of allowed window",
        "Facebook API: (#551) This person isn't available right now",
    ),
    ("threads", "public_reply"): (
        "Threads API: replies to this post are restricted by its author",
        "Threads API: rate limit reached, try again later",
    ),
}
